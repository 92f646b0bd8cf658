"""What the asker sees while a model reply is awaited: a line that says what the model is doing.

A CPU server can read a prompt for minutes before its first token, and write a few tokens a
second after it; progress lines come only when a tool runs, so without this the terminal and
the chat stay blank meanwhile. `WaitWatch` follows one attempt and reports, through
`AgentEvents.waiting`, a line that changes as it goes:

    waiting for the model: prompt 2,048 of 3,874 tokens read    (llama.cpp's own progress)
    waiting for the model (12 s)                                (a server that reports none)
    writing, 412 tokens                                         (streamed deltas, about a token each)

llama.cpp's server streams its prompt progress when the request carries `"return_progress":
true` (chunks with `prompt_progress` {total, cache, processed, time_ms}, one per batch read; the
field is sent only to servers known to be llama.cpp, worker/agent/request_shape.py). Elsewhere the
line counts the seconds.

Nothing is said for a reply that starts within `FIRST_LINE_SECONDS` (a fast hosted model shows no
line), then at most one line per `LINE_SECONDS`, only when it changed: sinks pace what they show
on top of that (the console, Slack's status, Discord's edits). The watch's thread reports while
the question's thread reads the reply; the text deltas it passes on go through `guarded`, so an
observer is never called from both at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from worker.agent.progress_lines import WAITING_LINES

FIRST_LINE_SECONDS = 2.0
LINE_SECONDS = 3.0
TICK_SECONDS = 0.5


def waiting_line(seconds: float, read: int = 0, total: int = 0, written: int = 0) -> str:
    """The line for a reply's state: writing, reading the prompt (when the server says), or waiting."""
    if written:
        return WAITING_LINES["writing"].format(tokens=written, s="" if written == 1 else "s")
    if total:
        return WAITING_LINES["reading"].format(read=min(read, total), total=total)
    return WAITING_LINES["waiting"].format(seconds=seconds)


def prompt_progress(chunk: dict[str, Any]) -> tuple[int, int] | None:
    """(tokens read, tokens in all) from a llama.cpp chunk's `prompt_progress`, if it has one."""
    progress = chunk.get("prompt_progress")
    if not isinstance(progress, dict):
        return None
    read, total = progress.get("processed"), progress.get("total")
    if isinstance(read, int) and isinstance(total, int) and read >= 0 and total > 0:
        return read, total
    return None


class WaitWatch:
    """One attempt's waiting line, reported from a thread of its own until the attempt ends."""

    def __init__(self, report: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> None:
        self._report = report
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._started = clock()
        self._read = 0
        self._total = 0
        self._written = 0
        self._shown = ""
        self._shown_at = float("-inf")
        self._thread = threading.Thread(target=self._run, name="codebot-waiting", daemon=True)

    def __enter__(self) -> WaitWatch:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    def prompt_read(self, read: int, total: int) -> None:
        self._read, self._total = read, total

    def token(self) -> None:
        self._written += 1

    def guarded(self, report: Callable[[str], None]) -> Callable[[str], None]:
        """`report`, never called while the watch's thread reports a line."""

        def call(text: str) -> None:
            with self._lock:
                report(text)

        return call

    def _run(self) -> None:
        if self._stop.wait(FIRST_LINE_SECONDS):
            return
        while True:
            now = self._clock()
            line = waiting_line(now - self._started, self._read, self._total, self._written)
            if line != self._shown and now - self._shown_at >= LINE_SECONDS - TICK_SECONDS / 2:
                with self._lock:
                    if self._stop.is_set():
                        return
                    self._report(line)
                self._shown, self._shown_at = line, now
            if self._stop.wait(TICK_SECONDS):
                return
