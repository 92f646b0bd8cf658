"""Time fitted to the server: its measured speeds size each attempt and bound each reply.

A CPU server reads a prompt at tens of tokens a second and writes at a few: an attempt given a
fixed share of the deadline is cut before the reply could have come, and a retry then queues
behind the abandoned request on a server that does not cancel it (llama-cpp-python). So:

- **Measured.** Every answer teaches the endpoint's prompt speed and generation speed
  (tokens/s): from llama.cpp's `timings` when the server sends them, else from `usage` and the
  clock (time to the first streamed delta for the prompt, the rest for generation). Kept in
  the endpoint memory, blended with what was known.
- **Sized.** An attempt gets at least the time the measured speeds say this request needs
  (prompt tokens to read plus `max_tokens` to write), within the question's time left; and
  `max_tokens` shrinks to what the server can write in the time left.
- **Not stacked.** When an attempt is abandoned on a server that keeps generating, the time
  it may still run is remembered (`busy_until`). The question that abandoned it sends nothing
  before then, and neither does any other where the server was observed serving one request
  at a time (worker/agent/concurrency.py); one observed serving several waits for no one. When
  that is past the deadline, the question ends now, saying so.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from worker.agent.waiting import WaitWatch, prompt_progress

MIN_REPLY_TOKENS = 64  # a bound below this leaves no room for a tool call or a sentence
ATTEMPT_MARGIN = 1.25  # an attempt gets this much more than the estimate (speeds vary under load)
SECONDS_FOR_CONNECTING = 1.0
UNKNOWN_CAP_TOKENS = 8192  # max_tokens where the window is unknown (hosted reasoning models count thinking)


@dataclass
class Timing:
    """One attempt, as the clock and the server saw it."""

    started: float  # monotonic
    first_delta: float | None = None  # monotonic, the first streamed text or tool-call fragment
    finished: float | None = None
    timings: dict[str, Any] | None = None  # llama.cpp's own measurement
    deltas: int = 0  # streamed chunks with text or a tool-call fragment (about a token each)
    last_delta: float | None = None  # monotonic, the latest such chunk so far
    last_chunk: float | None = None  # monotonic, the latest chunk of any kind (the finish, usage)


@dataclass(frozen=True)
class Speeds:
    prompt_tps: float
    generation_tps: float

    @property
    def known(self) -> bool:
        return self.prompt_tps > 0 and self.generation_tps > 0

    def seconds_for(self, prompt_tokens: int, reply_tokens: int) -> float:
        return prompt_tokens / self.prompt_tps + reply_tokens / self.generation_tps

    def reply_tokens_within(self, seconds: float, prompt_tokens: int) -> int:
        """How many tokens the server can write in `seconds` after reading the prompt."""
        return int((seconds - prompt_tokens / self.prompt_tps) * self.generation_tps)


def measured(timing: Timing, prompt_tokens: int, completion_tokens: int) -> tuple[float | None, float | None]:
    """(prompt tokens/s, generation tokens/s) of one answered attempt; None where unknown."""
    server = timing.timings or {}
    prompt = _positive(server.get("prompt_per_second"))
    generation = _positive(server.get("predicted_per_second"))
    if prompt is not None and _positive(server.get("prompt_n")) is not None and server["prompt_n"] < 16:
        prompt = None  # a cached prompt: a handful of new tokens says nothing of the speed
    if generation is not None and (_positive(server.get("predicted_n")) or 0) < 8:
        generation = None
    if prompt is None and generation is None and timing.finished is not None:
        total = timing.finished - timing.started
        if timing.first_delta is not None:
            waited = timing.first_delta - timing.started
            writing = timing.finished - timing.first_delta
            if prompt_tokens >= 64 and waited > 0.2:
                prompt = prompt_tokens / waited
            if completion_tokens >= 8 and writing > 0.2:
                generation = completion_tokens / writing
        elif completion_tokens >= 8 and total > 0.5:
            generation = (completion_tokens + 1) / total  # reading included: an underestimate, safe
    return prompt, generation


def _positive(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def timings_of_body(body: bytes) -> dict[str, Any] | None:
    """llama.cpp's `timings` object of a non-streamed reply, if it sent one."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    timings = data.get("timings") if isinstance(data, dict) else None
    return timings if isinstance(timings, dict) else None


class TimedStream:
    """A streamed reply, passed through unchanged, noting when the first delta came and any
    `timings` the server put in a chunk (llama.cpp does, in the last one); `watch` hears of the
    prompt's progress (llama.cpp's, when asked for) and of every delta, for the waiting line."""

    def __init__(self, stream: Any, timing: Timing, watch: WaitWatch | None = None) -> None:
        self._stream = stream
        self._timing = timing
        self._watch = watch
        self.response = stream.response

    def __iter__(self) -> Iterator[Any]:
        for chunk in self._stream:  # the JSON of each chunk, as the server sent it
            self._timing.last_chunk = time.monotonic()
            data = chunk if isinstance(chunk, dict) else {}
            choices = data.get("choices")
            if isinstance(choices, list) and any(_has_delta(choice) for choice in choices):
                self._timing.deltas += 1
                self._timing.last_delta = time.monotonic()
                if self._timing.first_delta is None:
                    self._timing.first_delta = self._timing.last_delta
                if self._watch is not None:
                    self._watch.token()
            progress = prompt_progress(data)
            if progress is not None and self._watch is not None:
                self._watch.prompt_read(*progress)
            timings = data.get("timings")
            if isinstance(timings, dict):
                self._timing.timings = timings
            yield chunk


def _has_delta(choice: object) -> bool:
    delta = choice.get("delta") if isinstance(choice, dict) else None
    return isinstance(delta, dict) and bool(delta.get("content") or delta.get("tool_calls"))
