"""Showing an answer while it is written: what a sink offers, and how the agent feeds it.

A platform sink may offer a live view of the question (Slack: a chat stream with task cards
and loading states; Discord: the progress message edited as the text grows, a typing
indicator while tools run). The job asks the sink for one with `live(text)` after `received()`,
both on the question's lane (worker/jobs/lane.py: the model is asked meanwhile, and what the
agent reports is held until the view exists); a sink without the method, or that answers None
or fails, gets today's one-line progress instead.

`LiveEvents` is the agent's observer (worker/agent/events.py) for such a view:
- text deltas go into a `LiveText` (worker/agent/live_text.py), which the view reads when it
  sends: redacted and citation-checked on a held-back window, never per delta;
- a tool call is shown by its description, redacted like every progress line;
- the waiting line while a model reply is awaited (worker/agent/waiting.py) goes to the view's
  `waiting`, which shows it where the view shows what the bot is doing;
- once the question's final message is stored by another run (this run was taken for dead),
  nothing more is shown.

The view's contract: its methods return at once (a sender thread or task does the network
work, paced for the platform's rate limits) and never raise; `close()` stops the sender and
returns once nothing more will be sent. The final message stays the sink's `answer()` /
`failed()`, which replace whatever the view showed (worker/jobs/sink.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from worker.agent.live_text import LiveText

log = logging.getLogger("codebot.live")

# How often (at most) the run asks Redis whether another run already stored the final message.
ANSWERED_CHECK_SECONDS = 1.0


class LiveView(Protocol):
    def thinking(self) -> None:
        """A model turn started (a loading state)."""

    def text_changed(self) -> None:
        """The LiveText given to `live()` has more text."""

    def waiting(self, line: str) -> None:
        """What the model is doing while its reply is awaited ("waiting for the model: prompt
        2,048 of 3,874 tokens read", "writing, 412 tokens"); each line replaces the last."""

    def tool_started(self, call_id: str, title: str) -> None:
        """A tool call started; `title` is redacted ("searching `retry` in payments")."""

    def tool_finished(self, call_id: str, ok: bool, failure: str = "") -> None:
        """A tool call ended; a failed one is shown as `failure` (redacted), never as done."""

    def close(self) -> None:
        """Stop sending; returns once nothing more will be sent. Idempotent."""


class LiveSink(Protocol):
    def live(self, text: LiveText) -> LiveView | None:
        """A live view of this question, or None when the platform cannot show one here."""


def live_view(sink: object, text: LiveText) -> LiveView | None:
    """The sink's live view, if it offers one (a failure to make it is logged, never raised)."""
    make = getattr(sink, "live", None)
    if not callable(make):
        return None
    try:
        view: LiveView | None = make(text)
        return view
    except Exception:
        log.warning("the live view could not be started; progress lines instead", exc_info=True)
        return None


class LiveEvents:
    """worker.agent.events.AgentEvents feeding a LiveView."""

    def __init__(
        self,
        view: LiveView,
        text: LiveText,
        redact: Callable[[str], str],
        answered_elsewhere: Callable[[], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.view = view
        self.live_text = text
        self.redact = redact
        self.answered_elsewhere = answered_elsewhere
        self.clock = clock
        self._checked_at = float("-inf")
        self._stopped = False

    def _wanted(self) -> bool:
        if self._stopped:
            return False
        now = self.clock()
        if now - self._checked_at >= ANSWERED_CHECK_SECONDS:
            self._checked_at = now
            if self.answered_elsewhere():
                self._stopped = True
                self.view.close()
        return not self._stopped

    def thinking(self) -> None:
        if self._wanted():
            self.live_text.new_turn()
            self.view.thinking()

    def text(self, delta: str) -> None:
        if not self._stopped:
            self.live_text.feed(delta)
            self.view.text_changed()

    def waiting(self, line: str) -> None:
        show = getattr(self.view, "waiting", None)  # a view made before waiting lines shows none
        if not self._stopped and callable(show):
            show(line)

    def tool_started(self, call_id: str, name: str, arguments: dict[str, Any], description: str) -> None:
        if self._wanted():
            self.live_text.finish_turn()  # the text before a tool call is all there is of this turn's
            self.view.text_changed()
            self.view.tool_started(call_id, self.redact(description))

    def tool_finished(self, call_id: str, ok: bool, failure: str = "") -> None:
        if not self._stopped:
            self.view.tool_finished(call_id, ok, self.redact(failure) if failure else "")
