"""What went wrong with Redis, in the terms an asker or an operator acts on.

Two kinds of trouble look alike to redis-py (both raise a RedisError) but call for different
help: a server that cannot be reached (down, restarting, hung, a failover under way), and one
that answers but refuses to write (MISCONF: it cannot save to a full or broken disk; OOM:
`maxmemory` reached with `noeviction`; READONLY: a replica, e.g. the old primary after a
failover). The adapters tell the asker which (bot/texts.py), the CLI says it in one line.
"""

from __future__ import annotations

from enum import StrEnum

from redis.exceptions import ReadOnlyError, ResponseError


class RedisUnavailable(Exception):
    """Redis cannot be reached; the message says which server and what to do."""


class RedisFailure(StrEnum):
    UNREACHABLE = "unreachable"
    REFUSES_WRITES = "refuses writes"
    ERROR = "error"  # any other error reply (a bug of ours, not the server's state)


# Error codes of a server that is up but will not take a write (redis-py keeps the code in
# `status_code` for the ones it maps to a class, and in the message for the others).
WRITE_REFUSALS = ("MISCONF", "OOM", "READONLY", "NOREPLICAS")

# Error replies of a server that is up but not serving yet: as good as unreachable for now.
BUSY = ("LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN")

_HINTS = {
    "MISCONF": "it cannot save to disk: free space where it writes (for the embedded Redis, "
    "the disk of CODEBOT_DATA_DIR) and see its log",
    "OOM": "it reached its maxmemory: raise maxmemory or free memory",
    "READONLY": "it is a read-only replica: point REDIS_URL at the primary, or use REDIS_SENTINELS",
    "NOREPLICAS": "it has too few replicas in sync (min-replicas-to-write)",
}


def _code(exc: BaseException) -> str:
    if isinstance(exc, ReadOnlyError):
        return "READONLY"
    code = getattr(exc, "status_code", None)
    if isinstance(code, str) and code:
        return code
    return str(exc).split(" ", 1)[0]


def redis_failure(exc: BaseException) -> RedisFailure:
    """Which kind of trouble `exc` (any exception met while talking to Redis) is."""
    if isinstance(exc, ResponseError) and _code(exc) in WRITE_REFUSALS:
        return RedisFailure.REFUSES_WRITES
    if isinstance(exc, ResponseError) and _code(exc) not in BUSY:
        return RedisFailure.ERROR
    return RedisFailure.UNREACHABLE


def failure_line(where: str, exc: BaseException) -> str:
    """One line for a log or the terminal: `where` (see redis_connection.describe), what, and the fix."""
    failure = redis_failure(exc)
    code = _code(exc)
    detail = str(exc) if str(exc).startswith(code) else f"{code} {exc}"
    if failure is RedisFailure.REFUSES_WRITES:
        return f"{where} refuses writes ({detail}) — {_HINTS.get(code, 'see its log')}"
    if failure is RedisFailure.ERROR:
        return f"{where} answered with an error ({detail})"
    if isinstance(exc, RedisUnavailable):
        return str(exc)
    return f"{where} is unreachable ({exc or type(exc).__name__})"
