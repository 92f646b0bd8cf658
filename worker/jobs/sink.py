"""How a worker talks back to the asker while and after it answers: one sink per platform.

The ReplySink contract, the same on every platform (Slack and Discord implement it in bot/,
the console one lives here; tests/test_reply_sinks.py holds every platform to it):

- A sink is made for one question by the platform's SinkFactory, which the composition root
  registers in the Runtime (codebot/wiring.py): inside the job (after the fork) while the
  question is answered, and by the outbox (worker/jobs/outbox.py) whenever a stored final
  message is delivered again, maybe hours later, on another machine, after the process that
  answered died.
- `received()` and `progress(text)` are courtesies: they never raise. A failure to post is
  logged and the question goes on; progress is throttled by the sink.
- The job calls `received()` (and `live()`, worker/jobs/live.py) on the question's lane, a
  thread of its own (worker/jobs/lane.py), and every later call from the question's thread
  after the lane is done: a sink is used from one thread at a time, not always the same one
  (DiscordSink's event loop is made on the lane and run later on the question's thread).
- `answer(answer)` and `failed(message)` deliver the question's one final message, which the
  outbox stored before calling them. They return only once all of it is in place: the
  message(s), 👀 taken off, ✅ or ⚠️ put on (✅ only for an answer not cut off:
  worker/jobs/outcomes.py). Otherwise they raise DeliveryFailed (the
  platform's error as its cause); the outbox tries again later with backoff, unless
  `retryable` is False (the platform says it never will take it: the channel is gone).
- Both are idempotent per question id, across processes and machines: every message a sink
  posts for a question is recorded in Redis under the question id as soon as the platform
  returns it (Slack: ts; Discord: message id, plus a nonce derived from the question id and
  the message's slot), and a later call edits what is recorded instead of posting again. So
  an attempt after a partial one (some chunks posted, a reaction refused) completes it, and
  an answer is never posted twice. The one window left is a platform that took a post whose
  reply never arrived (Slack has no idempotency key; Discord's nonce covers a few minutes).
- The stored final message is the truth: a sink that shows the answer as it is written
  (streaming, progressive edits) must make `answer()` replace whatever such a stream left,
  also a stream broken midway, with the stored answer.
- A sink needs nothing but its settings, Redis and the Question (its ReplyTarget): anything
  else it needs across attempts it keeps in Redis under the question id.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from redis import Redis
from redis.exceptions import RedisError

from config.settings import Settings
from worker.agent.citations import Source
from worker.jobs.question import Question, ReplyTarget

log = logging.getLogger("codebot.sink")

CONSOLE_STREAM_TTL_SECONDS = 3600
CONSOLE_STREAM_PREFIX = "codebot:console:"


@dataclass(frozen=True)
class Answer:
    markdown: str  # the reply: verified citations linked, a closing **Sources** section
    sources: list[Source] = field(default_factory=list)
    unverified: int = 0  # citations that could not be verified (left unlinked)
    ref: str = ""  # short reference id, also in the logs
    partial: bool = False  # True when budgets ran out and this is the best answer from what was found
    cut_off: bool = False  # the model's reply was cut off: shown with a note, marked ⚠️ instead of ✅


class DeliveryFailed(Exception):
    """The final message (an answer or an apology) did not reach the asker; the cause says why.

    `retryable` False: the platform says it never will (e.g. the channel was deleted), so the
    outbox gives up at once instead of trying for `delivery_give_up_seconds`.
    `retry_after_seconds`: the platform asked to wait this long (a 429's Retry-After); the
    outbox's next attempt waits at least that."""

    def __init__(
        self, message: str, retryable: bool = True, retry_after_seconds: float | None = None
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after_seconds = retry_after_seconds


class ReplySink(Protocol):
    def received(self) -> None:
        """The question was taken up (👀 on the asker's message). Never raises."""

    def progress(self, text: str) -> None:
        """What the agent is doing now; implementations throttle their updates. Never raises."""

    def answer(self, answer: Answer) -> None:
        """The final, cited answer (replacing any progress message), then ✅ (⚠️ when it was
        cut off). Idempotent per question. Raises DeliveryFailed when it is not all in place."""

    def failed(self, message: str) -> None:
        """A clear apology with the reference id, then ⚠️. Idempotent per question. Raises
        DeliveryFailed when it is not all in place."""


# How the composition root registers a platform: SlackSink and DiscordSink are such factories.
SinkFactory = Callable[[Settings, Redis, Question], ReplySink]


class Notifier(Protocol):
    """Tells an admin privately how their command went (e.g. a refresh); best effort."""

    def __call__(self, settings: Settings, target: ReplyTarget, user: str, markdown: str) -> None: ...


class ConsoleSink:
    """Publishes events on a Redis stream that `codebot ask` reads and prints."""

    def __init__(self, redis: Redis, question: Question) -> None:
        self.redis = redis
        self.key = CONSOLE_STREAM_PREFIX + question.id

    def _emit(self, kind: str, **fields: object) -> None:
        payload = {"kind": kind, "data": json.dumps(fields)}
        pipe = self.redis.pipeline(transaction=False)  # one round trip for the event and its expiry
        pipe.xadd(self.key, payload)
        pipe.expire(self.key, CONSOLE_STREAM_TTL_SECONDS)
        pipe.execute()

    def _courtesy(self, kind: str, **fields: object) -> None:
        try:
            self._emit(kind, **fields)
        except RedisError as exc:
            log.warning("console %s event not sent for %s: %s", kind, self.key, exc)

    def _final(self, kind: str, **fields: object) -> None:
        try:
            self._emit(kind, **fields)
        except RedisError as exc:
            raise DeliveryFailed(f"console {kind} not sent: {exc}") from exc

    def received(self) -> None:
        self._courtesy("received")

    def progress(self, text: str) -> None:
        self._courtesy("progress", text=text)

    def waiting(self, text: str) -> None:
        """The line `codebot ask` shows while the model's reply is awaited, updated in place."""
        self._courtesy("waiting", text=text)

    def answer(self, answer: Answer) -> None:
        self._final(
            "answer",
            markdown=answer.markdown,
            unverified=answer.unverified,
            ref=answer.ref,
            sources=[s.__dict__ for s in answer.sources],
            outcome="cut_off" if answer.cut_off else "answered",
        )

    def failed(self, message: str, outcome: str = "failed") -> None:
        """`outcome`: the kind of reply (worker/jobs/outcomes.py), for `codebot ask`'s exit code."""
        self._final("failed", text=message, outcome=outcome)


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
