"""Per-user rate limit and queue-depth limit, kept in Redis so every adapter process shares them.

The intake (bot/intake.py) asks these before enqueueing a question, after dedupe, so a
duplicate delivery of one message never counts twice. Each answer says how long to wait.
"""

from __future__ import annotations

import math
import time
import uuid

from redis import Redis

from config.settings import Settings
from worker.jobs.queue import queue_depth

RATE_KEY_PREFIX = "codebot:rate:"


def check_rate(redis: Redis, user_key: str, settings: Settings) -> int | None:
    """Count one question for `user_key` (e.g. `slack:U123`); None when allowed, otherwise the
    whole seconds to wait until the oldest question in the window leaves it (the refused
    question is not counted).

    A sliding window: a sorted set of this user's question times over the last
    `rate_limit_window_seconds`, trimmed, added to and counted in one transaction.
    """
    key = RATE_KEY_PREFIX + user_key
    window = settings.rate_limit_window_seconds
    now = time.time()
    member = f"{now:.6f}-{uuid.uuid4().hex[:8]}"
    pipe = redis.pipeline(transaction=True)
    pipe.zremrangebyscore(key, "-inf", now - window)
    pipe.zadd(key, {member: now})
    pipe.zcard(key)
    pipe.expire(key, math.ceil(window) + 1)
    _, _, count, _ = pipe.execute()
    if int(count) <= settings.rate_limit_questions:
        return None
    redis.zrem(key, member)  # a refused question does not use up the window
    oldest = redis.zrange(key, 0, 0, withscores=True)
    started = float(oldest[0][1]) if oldest else now
    # never more than the window: a question counted by another adapter thread a moment after
    # this one read the clock is "older" than now
    return max(1, min(math.ceil(window), math.ceil(started + window - now)))


def depth_if_full(redis: Redis, settings: Settings) -> int | None:
    """None while new questions are accepted; otherwise the number already waiting."""
    depth = queue_depth(redis)
    return depth if depth >= settings.queue_max_depth else None
