"""The write side of the history: one Redis stream entry per fact, never a database call.

Appending is one XADD, queued on the caller's pipeline when it has one, so a question's facts
reach the stream with its console record or not at all, and a Redis failure costs the history
that fact, never the question. Each entry carries its own id (a random hex string): the
recorder writes it as the row's key, so an entry read twice (an XACK lost in a crash) is one row.

The stream is capped at STREAM_MAX_ENTRIES (approximately, so a trim is cheap): ~10 days of
questions at the peak rate of docs/operations.md with the recorder stopped, ~1 KB each.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any, Literal

from redis import Redis
from redis.client import Pipeline
from redis.exceptions import RedisError

log = logging.getLogger("codebot.history")

STREAM_KEY = "codebot:history:events"
STREAM_MAX_ENTRIES = 1_000_000

Kind = Literal["question", "vote", "reason", "sync", "model"]
KINDS: tuple[Kind, ...] = ("question", "vote", "reason", "sync", "model")


def event_fields(kind: Kind, facts: dict[str, Any], at: float | None = None) -> dict[str, str]:
    """One stream entry: its key, kind, time and facts (JSON)."""
    return {
        "id": uuid.uuid4().hex,
        "kind": kind,
        "at": f"{time.time() if at is None else at:.6f}",
        "facts": json.dumps(facts, default=str),
    }


def append_event(
    redis: Redis | None, kind: Kind, facts: dict[str, Any], into: Pipeline | None = None
) -> None:
    """Add one fact to the history's stream; `into`: queued on the caller's pipeline, which it
    sends (and whose failure it meets). Alone, a Redis failure is logged and the fact is lost."""
    fields = event_fields(kind, facts)
    if into is not None:
        into.xadd(STREAM_KEY, fields, maxlen=STREAM_MAX_ENTRIES, approximate=True)
        return
    if redis is None:
        return
    try:
        redis.xadd(STREAM_KEY, fields, maxlen=STREAM_MAX_ENTRIES, approximate=True)
    except RedisError:
        log.warning("could not append a %s event to the history's stream", kind)
