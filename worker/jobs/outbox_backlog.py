"""What `codebot status` and the console say about delivery: the final messages the platform
refused so far and are still being tried, and those given up (worker/jobs/outbox.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from redis import Redis

from worker.jobs.outbox import DUE_KEY, GAVE_UP_KEY, GAVE_UP_SHOWN_SECONDS, entry_key, text_of


@dataclass(frozen=True)
class Undelivered:
    question_id: str
    platform: str
    error: str
    attempts: int
    age_seconds: float  # since the final message was stored


@dataclass(frozen=True)
class Backlog:
    """What `codebot status` says about delivery."""

    retrying: int  # final messages the platform refused so far, still being tried
    retrying_shown: list[Undelivered]  # the oldest of them
    given_up: int  # given up in the last GAVE_UP_SHOWN_SECONDS
    given_up_shown: list[Undelivered]  # the latest of them


def backlog(redis: Redis, shown: int = 5) -> Backlog:
    now = time.time()
    # all of them (a long outage leaves thousands), not one pass's batch: an admin command, read rarely
    waiting = [text_of(raw) for raw in redis.zrange(DUE_KEY, 0, -1)]
    # an entry not attempted yet is being delivered by the run that stored it
    retrying = [entry for entry in _entries(redis, waiting, now) if entry.attempts > 0]
    retrying.sort(key=lambda entry: -entry.age_seconds)
    since = now - GAVE_UP_SHOWN_SECONDS
    given_up = int(redis.zcount(GAVE_UP_KEY, since, "+inf"))
    latest = [text_of(raw) for raw in redis.zrevrangebyscore(GAVE_UP_KEY, "+inf", since, start=0, num=shown)]
    return Backlog(len(retrying), retrying[:shown], given_up, _entries(redis, latest, now))


def _entries(redis: Redis, question_ids: list[str], now: float) -> list[Undelivered]:
    pipe = redis.pipeline(transaction=False)
    for question_id in question_ids:
        pipe.hmget(entry_key(question_id), "platform", "last_error", "attempts", "stored_at")
    found = []
    for question_id, values in zip(question_ids, pipe.execute(), strict=True):
        platform, error, attempts, stored_at = (text_of(v) if v is not None else "" for v in values)
        if not stored_at:
            continue  # expired
        found.append(Undelivered(question_id, platform, error, int(attempts or 0), now - float(stored_at)))
    return found
