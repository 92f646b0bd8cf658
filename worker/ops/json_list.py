"""Capped Redis lists of JSON records (recent questions, syncs, model errors), and JSON objects
in hash fields (what a worker reports in its RQ record): read tolerantly.

Records come from any release and any machine sharing the Redis: one that is not a JSON object
is skipped, never an error for the page or command reading the list."""

from __future__ import annotations

import json
from typing import Any

from redis import Redis


def json_objects(redis: Redis, key: str, count: int) -> list[dict[str, Any]]:
    """The first `count` records of the list at `key` (newest first where writers LPUSH)."""
    records: list[dict[str, Any]] = []
    for raw in redis.lrange(key, 0, count - 1):
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def json_field(redis: Redis, key: str, field: str) -> dict[str, Any] | None:
    """The JSON object in the hash field `field` of `key`; None when absent or not an object."""
    raw = redis.hget(key, field)
    if not raw:
        return None
    try:
        facts = json.loads(raw)
    except ValueError:
        return None
    return facts if isinstance(facts, dict) else None
