"""Claims in Redis that survive redis-py's retry: a claim never answers "taken" to its taker.

A claim is a key set only when it is free (`SET NX`): one question per user message, one
final message per question, one machine per scheduled refresh. redis-py retries a command
that timed out once, on a new connection (worker/ops/redis_connection.py). When Redis was
only stalled (a long fsync, a SIGSTOP, a swapped-out server) it then runs both: a plain
`SET NX` takes the key on the first try and answers the retry `nil`, "already taken", so the
caller drops what it had just claimed.

Every claim here carries a token unique to the claimer and is made by a small script that
answers "yours" when the key is free (and takes it) or already holds the caller's own token.
Redis 6.2 (the embedded server) has no `SET NX GET`, hence the script.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from redis import Redis
from redis.exceptions import ResponseError

# KEYS[1] the claim; ARGV[1] the claimer's token, ARGV[2] its lifetime in milliseconds.
_CLAIM = """
local held = redis.call('GET', KEYS[1])
if not held then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if held == ARGV[1] then
  return 1
end
return 0
"""
# Deletes the claim only while it is still the caller's (an expired claim may be someone else's now).
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


# A script's write refused by the server comes back as `ERR Error running script (call to …):
# @user_script:4: … -MISCONF …`; the refusal's own code is what callers tell apart
# (worker/ops/redis_errors.py: "refuses writes", not "unreachable").
_SCRIPT_REFUSAL = re.compile(r"-([A-Z]+) (.*)$", re.S)


def run_script(redis: Redis, script: str, keys: list[str], args: list[Any]) -> Any:
    """EVAL `script`; a write it makes that the server refuses raises as that write would."""
    try:
        return redis.eval(script, len(keys), *keys, *args)
    except ResponseError as exc:
        refusal = _SCRIPT_REFUSAL.search(str(exc))
        if refusal is None or not str(exc).startswith("Error running script"):
            raise
        raise ResponseError(f"{refusal.group(1)} {refusal.group(2)}") from exc


def new_token(label: str = "") -> str:
    """A token no other claimer has: `label` (e.g. a host name, shown to operators) plus a random part."""
    random = uuid.uuid4().hex
    return f"{label}:{random}" if label else random


def claim(redis: Redis, key: str, token: str, ttl_seconds: float) -> bool:
    """Take `key` for `ttl_seconds` unless someone else holds it. True for the holder, also
    when asked again (a retry) by the one who already took it."""
    milliseconds = max(1, round(ttl_seconds * 1000))
    return bool(run_script(redis, _CLAIM, [key], [token, milliseconds]))


def release(redis: Redis, key: str, token: str) -> bool:
    """Give `key` up if it is still held with `token`; True when it was."""
    return bool(run_script(redis, _RELEASE, [key], [token]))
