"""A Redis outage for tests: the embedded server killed abruptly (SIGKILL), as a crash would."""

from __future__ import annotations

import contextlib
import os

import redis
from redis import Redis

from config.settings import Settings
from worker.ops.redis_connection import server_pid


def kill_embedded_server(settings: Settings) -> None:
    """Stop the embedded server abruptly; `ensure_embedded_server` starts it again."""
    pid = server_pid(settings)
    if pid:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)


def is_reachable(client: Redis) -> bool:
    """Does the server answer a PING now?"""
    try:
        return bool(client.ping())
    except redis.ResponseError:  # an error reply (MISCONF refuses even PING) is an answer
        return True
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False
