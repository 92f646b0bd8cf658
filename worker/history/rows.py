"""From stream entries to table rows: what each kind of event becomes in the database.

Facts are hostile (a question's text, a tool line, a reason, an error): they are stored as
text, never interpreted; anything missing or of the wrong type becomes an empty value, so a
record from an older or newer release is stored rather than stalling the recorder.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table

from worker.history import schema

TRACE_LINE_CHARS = 500
TRACE_KEPT_LINES = 100


@dataclass(frozen=True)
class Event:
    """One stream entry: its own id (the rows' key), kind, time and facts."""

    id: str
    kind: str
    at: float
    facts: dict[str, Any]


def parse_entry(fields: dict[bytes | str, bytes | str]) -> Event | None:
    """A stream entry's fields, or None when it is not one of ours (it is skipped, and acked)."""
    text = {_text(k): _text(v) for k, v in fields.items()}
    try:
        facts = json.loads(text.get("facts", "{}"))
        at = float(text.get("at", ""))
    except ValueError:
        return None
    event_id = text.get("id", "")
    if not isinstance(facts, dict) or not event_id or len(event_id) > schema.ID:
        return None
    return Event(id=event_id, kind=text.get("kind", ""), at=at, facts=facts)


def rows_by_table(events: list[Event]) -> dict[Table, list[dict[str, Any]]]:
    """The rows these events become, grouped by table (an unknown kind becomes none)."""
    rows: dict[Table, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        if event.kind == "question":
            rows[schema.questions].append(_question_row(event))
            rows[schema.tool_calls].extend(_tool_call_rows(event))
        elif event.kind == "vote":
            rows[schema.votes].append(
                _base(event) | _strings(event.facts, "question_id", "user", "vote", "platform")
            )
        elif event.kind == "reason":
            rows[schema.reasons].append(_base(event) | _strings(event.facts, "question_id", "user", "reason"))
        elif event.kind == "sync":
            rows[schema.syncs].append(_sync_row(event))
        elif event.kind == "model":
            kind = str(event.facts.get("kind", "error"))[:64]
            rows[schema.model_events].append(_base(event) | {"kind": kind, "facts": json.dumps(event.facts)})
    return rows


def _question_row(event: Event) -> dict[str, Any]:
    facts = event.facts
    kept = {key: value for key, value in facts.items() if key != "trace"}
    row = _base(event) | _strings(
        facts, "ref", "platform", "channel", "thread", "asker", "status", "question"
    )
    row |= _numbers(facts, int, "hops", "tool_calls", "prompt_tokens", "completion_tokens")
    row |= _numbers(facts, float, "seconds")
    row.update(
        question_id=str(facts.get("id", "")),
        asked_at=_number(facts.get("asked_at"), float),
        repos=json.dumps(facts.get("repos") if isinstance(facts.get("repos"), list) else []),
        follow_up=bool(facts.get("follow_up")),
        reason=None if facts.get("reason") is None else str(facts["reason"]),
        facts=json.dumps(kept, default=str),
    )
    return row


def _tool_call_rows(event: Event) -> list[dict[str, Any]]:
    trace = event.facts.get("trace")
    lines = trace[:TRACE_KEPT_LINES] if isinstance(trace, list) else []
    return [
        {"event_id": event.id, "seq": seq, "at": event.at, "line": str(line)[:TRACE_LINE_CHARS]}
        for seq, line in enumerate(lines)
    ]


def _sync_row(event: Event) -> dict[str, Any]:
    facts = event.facts
    row = _base(event) | _strings(facts, "repo", "host", "origin", "sha", "error")
    row.update(
        ok=bool(facts.get("ok")),
        changed=bool(facts.get("changed")),
        size_bytes=_number(facts.get("size_bytes"), int),
        error_kind=str(facts.get("error_kind") or "")[:32],
        seconds=_number(facts.get("seconds"), float),
    )
    return row


def _base(event: Event) -> dict[str, Any]:
    return {"event_id": event.id, "at": event.at}


def _strings(facts: dict[str, Any], *names: str) -> dict[str, str]:
    return {name: "" if facts.get(name) is None else str(facts[name]) for name in names}


def _numbers(facts: dict[str, Any], kind: type[int] | type[float], *names: str) -> dict[str, Any]:
    return {name: _number(facts.get(name), kind) or 0 for name in names}


def _number(value: object, kind: type[int] | type[float]) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return kind(value)
    except ValueError:
        return None


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value
