"""How a worker talks back to the asker while and after it answers: one sink per platform.

The job only ever calls these four methods; each chat platform implements them in `bot/`
(Slack, Discord) and the console one lives here (it streams events through Redis to the
`codebot ask` process, which may not be the process running the job).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from redis import Redis

from worker.jobs.question import Question

CONSOLE_STREAM_TTL_SECONDS = 3600
CONSOLE_STREAM_PREFIX = "codebot:console:"


@dataclass(frozen=True)
class Source:
    repo: str
    path: str
    start: int
    end: int
    url: str | None  # a link to the exact commit, or None when the repo has no web URL
    label: str  # what to show: `repo:path#L12-L30` or `repo:path:12-30 @ abc1234`


@dataclass(frozen=True)
class Answer:
    markdown: str  # the reply: verified citations linked, a closing **Sources** section
    sources: list[Source] = field(default_factory=list)
    unverified: int = 0  # citations that could not be verified (left unlinked)
    ref: str = ""  # short reference id, also in the logs
    partial: bool = False  # True when budgets ran out and this is the best answer from what was found


class ReplySink(Protocol):
    def received(self) -> None:
        """The question was taken up (👀 on the asker's message)."""

    def progress(self, text: str) -> None:
        """What the agent is doing now; implementations throttle their updates."""

    def answer(self, answer: Answer) -> None:
        """The final, cited answer (replacing any progress message), then ✅."""

    def failed(self, message: str) -> None:
        """A clear apology with the reference id, then ⚠️."""


SinkFactory = Callable[[Question], ReplySink]


class ConsoleSink:
    """Publishes events on a Redis stream that `codebot ask` reads and prints."""

    def __init__(self, redis: Redis, question: Question) -> None:
        self.redis = redis
        self.key = CONSOLE_STREAM_PREFIX + question.id

    def _emit(self, kind: str, **fields: object) -> None:
        payload = {"kind": kind, "data": json.dumps(fields)}
        self.redis.xadd(self.key, payload)
        self.redis.expire(self.key, CONSOLE_STREAM_TTL_SECONDS)

    def received(self) -> None:
        self._emit("received")

    def progress(self, text: str) -> None:
        self._emit("progress", text=text)

    def answer(self, answer: Answer) -> None:
        self._emit(
            "answer",
            markdown=answer.markdown,
            unverified=answer.unverified,
            ref=answer.ref,
            sources=[s.__dict__ for s in answer.sources],
        )

    def failed(self, message: str) -> None:
        self._emit("failed", text=message)


def read_console_events(
    redis: Redis, question_id: str, timeout_seconds: float, poll_ms: int = 500
) -> Iterator[tuple[str, dict[str, object]]]:
    """Yield (kind, fields) from a ConsoleSink until an answer or failure, or the timeout."""
    key = CONSOLE_STREAM_PREFIX + question_id
    last = "0-0"
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        batches = redis.xread({key: last}, count=100, block=poll_ms)
        for _stream, entries in batches or []:
            for entry_id, raw in entries:
                last = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
                kind = _text(raw.get(b"kind", raw.get("kind", b"")))
                fields = json.loads(_text(raw.get(b"data", raw.get("data", b"{}"))))
                yield kind, fields
                if kind in ("answer", "failed"):
                    return


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
