"""The connection to Redis: `REDIS_URL`, `REDIS_SENTINELS`, or else one embedded server per data dir.

- `REDIS_URL`: one server (or an endpoint that always reaches the primary).
- `REDIS_SENTINELS` + `REDIS_SENTINEL_MASTER`: the primary is asked of the sentinels on every
  new connection, so after a failover each process reconnects to the new primary by itself
  (redis-py's SentinelConnectionPool; RQ takes any client, so workers and horses follow too).
- neither: the embedded server under the data dir (worker/ops/embedded_redis.py), whose clients
  start it again should it die under a long-running process.

Every client fails fast: 3 s to connect, 10 s to read, one immediate retry. A server we do not
manage is checked once per process for settings that lose questions (no persistence, an
eviction policy), and a warning names them.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import redis
from redis import Redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelManagedConnection

from config.settings import Settings
from worker.ops.embedded_redis import (
    CONNECT_TIMEOUT_SECONDS,
    QUICK_RETRIES,
    SOCKET_TIMEOUT_SECONDS,
    EmbeddedServer,
    StopOutcome,
    redis_server_binary,
)
from worker.ops.redis_errors import RedisFailure, RedisUnavailable, failure_line, redis_failure

__all__ = [
    "SOCKET_TIMEOUT_SECONDS",
    "RedisFailure",
    "RedisUnavailable",
    "StopOutcome",
    "connect",
    "describe",
    "embedded",
    "ensure_embedded_server",
    "failure_line",
    "redis_failure",
    "redis_server_binary",
    "server_pid",
    "socket_path",
    "stop_embedded_server",
    "write_trouble",
]

log = logging.getLogger("codebot.redis")

HEALTH_CHECK_INTERVAL_SECONDS = 30
WRITE_PROBE_KEY = "codebot:write-probe"  # written at each connect: does the server store anything?
WRITE_PROBE_TTL_SECONDS = 60  # an idle pooled connection is PINGed before reuse after this long


def embedded(settings: Settings) -> EmbeddedServer:
    return EmbeddedServer.under(settings.data_dir)


def embedded_dir(settings: Settings) -> Path:
    return embedded(settings).home


def socket_path(settings: Settings) -> Path:
    return embedded(settings).socket


def describe(settings: Settings) -> str:
    """Where the queue lives, safe to print (no password)."""
    if settings.redis_sentinels:
        return f"Redis primary '{settings.redis_sentinel_master}' via Sentinel at {settings.redis_sentinels}"
    if settings.redis_url:
        parsed = redis.connection.parse_url(settings.redis_url)
        host = parsed.get("host") or parsed.get("path", "?")
        return f"Redis at {host}:{parsed.get('port', 6379)}" if "host" in parsed else f"Redis at {host}"
    return f"embedded Redis under {embedded(settings).home}"


def _password(settings: Settings) -> str | None:
    return settings.redis_password.get_secret_value() if settings.redis_password else None


class _SentinelConnection(SentinelManagedConnection):
    """redis-py's Sentinel connection, but one an exception interrupts mid-reply is dropped, as
    any other redis-py connection is (its `disconnect_on_error` defaults to False there). RQ's
    warm shutdown raises from a signal handler while a worker waits in BLMOVE: the connection
    would go back to the pool with BLMOVE's reply still to come, and the next command on it
    (registering the worker's death) would wait out the dequeue timeout and read that reply.
    Upstream: redis/redis-py#4292 (open)."""

    def read_response(self, *args: Any, disconnect_on_error: bool = True, **kwargs: Any) -> Any:
        return super().read_response(*args, disconnect_on_error=disconnect_on_error, **kwargs)


def _sentinel_client(settings: Settings) -> Redis:
    sentinel_password = settings.redis_sentinel_password
    sentinels = Sentinel(
        settings.sentinel_addresses,
        sentinel_kwargs={
            "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS,
            "socket_timeout": CONNECT_TIMEOUT_SECONDS,
            "retry": Retry(NoBackoff(), QUICK_RETRIES),  # not redis-py's default backoff, per sentinel
            "password": sentinel_password.get_secret_value() if sentinel_password else None,
        },
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        health_check_interval=HEALTH_CHECK_INTERVAL_SECONDS,
        retry=Retry(NoBackoff(), QUICK_RETRIES),
        password=_password(settings),
    )
    return sentinels.master_for(settings.redis_sentinel_master, connection_class=_SentinelConnection)


def _url_client(settings: Settings) -> Redis:
    assert settings.redis_url
    return Redis.from_url(
        settings.redis_url,
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        health_check_interval=HEALTH_CHECK_INTERVAL_SECONDS,
        retry=Retry(NoBackoff(), QUICK_RETRIES),
        password=_password(settings),  # a password in the URL wins
    )


def write_trouble(client: Redis) -> redis.RedisError | None:
    """Why the server will not store anything (MISCONF, OOM, READONLY...), or None if it does:
    a write of one short-lived key finds out (a read-only replica still answers PING)."""
    try:
        client.set(WRITE_PROBE_KEY, "1", ex=WRITE_PROBE_TTL_SECONDS)
    except redis.ResponseError as exc:
        return exc
    return None


def _checked(settings: Settings, client: Redis, check_writes: bool) -> Redis:
    try:
        client.ping()
    except redis.ResponseError:
        pass  # it answers, with an error (MISCONF refuses even PING): _writable says which
    except redis.AuthenticationError:  # a ConnectionError too: caught first
        fix = (
            "REDIS_PASSWORD (or REDIS_SENTINEL_PASSWORD for the sentinels)"
            if settings.redis_sentinels
            else "REDIS_URL (or needs one: redis://:PASSWORD@host:port)"
        )
        raise RedisUnavailable(f"{describe(settings)} refused the password in {fix}") from None
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        fix = (
            "Check the sentinels, REDIS_SENTINELS and REDIS_SENTINEL_MASTER."
            if settings.redis_sentinels
            else "Start it, fix REDIS_URL, or unset REDIS_URL to use the embedded server."
        )
        raise RedisUnavailable(f"{describe(settings)} is unreachable ({exc}). {fix}") from None
    return _writable(settings, client, check_writes)


def _writable(settings: Settings, client: Redis, check_writes: bool) -> Redis:
    refused = write_trouble(client) if check_writes else None
    if refused is not None:
        raise RedisUnavailable(failure_line(describe(settings), refused))
    if settings.redis_url or settings.redis_sentinels:
        warn_if_unsafe(client, describe(settings))
    return client


def connect(settings: Settings, start_embedded: bool = True, check_writes: bool = True) -> Redis:
    """A checked connection, or RedisUnavailable saying where and what to do.

    `start_embedded` (a command starting up): start the embedded server if it is not running,
    even after `codebot redis stop`. Without it, a dead server is still started again unless
    an operator stopped it (the client heals itself either way). `check_writes`: a server
    that answers but refuses writes (MISCONF, OOM, READONLY) is unavailable too."""
    if settings.redis_sentinels:
        return _checked(settings, _sentinel_client(settings), check_writes)
    if settings.redis_url:
        return _checked(settings, _url_client(settings), check_writes)
    server = embedded(settings)
    if start_embedded:
        server.ensure_running(explicit=True)
    client = server.client()
    try:
        client.ping()
    except redis.ResponseError:
        pass  # it answers, with an error (MISCONF refuses even PING): _writable says which
    except (redis.RedisError, OSError) as exc:
        raise RedisUnavailable(failure_line(describe(settings), exc)) from None
    return _writable(settings, client, check_writes)


_safety_checked: set[str] = set()
_safety_lock = threading.Lock()


def warn_if_unsafe(client: Redis, where: str) -> list[str]:
    """Once per process and server: one warning line if its settings can lose questions.

    Without AOF or RDB, a restart empties the queue; with an eviction policy, memory pressure
    deletes jobs and markers. Returns the problems found (empty if none, or if the server does
    not let us read its configuration, as some managed services do)."""
    with _safety_lock:
        if where in _safety_checked:
            return []
        _safety_checked.add(where)
    try:
        config: dict[str, str] = {}
        for name in ("appendonly", "save", "maxmemory-policy"):
            config.update({str(k): str(v) for k, v in client.config_get(name).items()})
    except redis.RedisError as exc:
        log.info("could not check the persistence of %s (%s)", where, exc)
        return []
    problems = []
    if config.get("appendonly") != "yes" and not config.get("save", "").strip():
        problems.append(
            'it has no persistence (appendonly no, save ""): a restart loses every queued question — '
            "set appendonly yes"
        )
    policy = config.get("maxmemory-policy", "noeviction")
    if policy != "noeviction":
        problems.append(
            f"its maxmemory-policy is {policy}: under memory pressure it deletes queued questions — "
            "set maxmemory-policy noeviction"
        )
    if problems:
        log.warning("%s can lose questions: %s", where, "; ".join(problems))
    return problems


# --- the embedded server, by settings (the CLI and tests) ---------------------------------------


def ensure_embedded_server(settings: Settings) -> Path:
    """Start the embedded server unless it runs already; its socket path."""
    server = embedded(settings)
    server.ensure_running(explicit=True)
    return server.socket


def stop_embedded_server(settings: Settings) -> bool:
    """Shut the embedded server down, saving its data; False if it was not running."""
    return embedded(settings).stop() is StopOutcome.STOPPED


def server_pid(settings: Settings) -> int | None:
    return embedded(settings).pid()
