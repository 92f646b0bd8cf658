"""A Redis outage for tests: the embedded server killed abruptly (SIGKILL), as a crash would."""

from __future__ import annotations

import contextlib
import os

from config.settings import Settings
from worker.ops.redis_connection import server_pid


def kill_embedded_server(settings: Settings) -> None:
    """Stop the embedded server abruptly; `ensure_embedded_server` starts it again."""
    pid = server_pid(settings)
    if pid:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
