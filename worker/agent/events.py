"""What the agent tells its caller while it works: the observer interface of one question.

The agent calls an `AgentEvents` as things happen, from the thread that runs the question,
in this order for each model turn:

    thinking()                                  a model turn starts (a request is on its way)
    text(delta) ...                             the model's prose as it streams in, raw
    tool_started(call_id, name, arguments, description)   one per tool call it made, in order,
                                                          once all of the turn's calls are running
    tool_finished(call_id, ok, failure)                   one per call, in the same order, as each
                                                          result is taken back

then `thinking()` again for the next turn. Meanwhile, from another thread, while a model reply is
awaited (worker/agent/waiting.py):

    waiting(line)                               "waiting for the model: prompt 2,048 of 3,874
                                                tokens read", "waiting for the model (12 s)",
                                                "writing, 412 tokens": each line replaces the last

never at the same time as `text` (the two are serialised), and never after the turn's
`tool_started` or the next `thinking()`. What it promises a sink (e.g. a Slack or Discord
stream built on it):

- `text` deltas are the model's raw output: nothing is redacted, no citation is checked, and
  mentions are not neutralised yet. A sink that shows them must pass every chunk through the
  same redaction and mention-neutralising as a full post, and resolve citations itself.
- The text of a turn that then calls tools is a preamble ("Let me search…"), not the answer;
  the answer is the text of the last turn. `thinking()` marks where a new turn's text starts.
- A turn whose request is retried (a 5xx, a refused optional field, a stream that broke) may
  stream its text again after another `thinking()`: a sink keeps only the latest turn's text.
- `tool_started` carries the parsed arguments (`{}` when the model sent invalid JSON) and a
  short human description ("searching `retry|backoff` in payments-api"); every call that
  starts also finishes (`ok` False when the tool answered with an error). A failed call's
  `failure` is the line to show instead of its description, so that nothing shows it as done:
  "searching `retry` in acme — failed: no repo `acme`" (inert, like the description). A call
  sure to fail (a repo not in scope, a tool that does not exist) starts with that line already.
- Calls are synchronous and should return quickly: a slow sink slows the question down.
  An exception raised by a sink is logged and swallowed; it never fails the question.

`NoEvents` ignores everything; `ProgressEvents` adapts today's `progress(text)` callback (one
line per tool call, as the sinks already show), so existing callers keep working unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger("codebot.agent")


class AgentEvents(Protocol):
    def thinking(self) -> None: ...

    def text(self, delta: str) -> None: ...

    def waiting(self, line: str) -> None: ...

    def tool_started(self, call_id: str, name: str, arguments: dict[str, Any], description: str) -> None: ...

    def tool_finished(self, call_id: str, ok: bool, failure: str = "") -> None: ...


class NoEvents:
    """The default observer: nothing is shown while the agent works."""

    def thinking(self) -> None:
        pass

    def text(self, delta: str) -> None:
        pass

    def waiting(self, line: str) -> None:
        pass

    def tool_started(self, call_id: str, name: str, arguments: dict[str, Any], description: str) -> None:
        pass

    def tool_finished(self, call_id: str, ok: bool, failure: str = "") -> None:
        pass


class ProgressEvents(NoEvents):
    """Feeds a `progress(text)` callback: one line per tool call, its description, and one more
    for a call that failed (unless it started with that line already); the waiting line goes to
    `waiting` (a sink that updates it in place), else it is a progress line too."""

    def __init__(self, progress: Callable[[str], None], waiting: Callable[[str], None] | None = None) -> None:
        self.progress = progress
        self.shown: dict[str, str] = {}
        self._waiting = waiting or progress

    def waiting(self, line: str) -> None:
        self._waiting(line)

    def tool_started(self, call_id: str, name: str, arguments: dict[str, Any], description: str) -> None:
        self.shown[call_id] = description
        self.progress(description)

    def tool_finished(self, call_id: str, ok: bool, failure: str = "") -> None:
        if not ok and failure and self.shown.pop(call_id, None) != failure:
            self.progress(failure)


class SafeEvents:
    """Wraps a caller's observer so that a failing sink never fails the question."""

    def __init__(self, inner: AgentEvents) -> None:
        self.inner = inner

    def _call(self, method: str, *args: Any) -> None:
        try:
            getattr(self.inner, method)(*args)
        except Exception:
            log.warning("an agent event observer failed on %s", method, exc_info=True)

    def thinking(self) -> None:
        self._call("thinking")

    def text(self, delta: str) -> None:
        self._call("text", delta)

    def waiting(self, line: str) -> None:
        self._call("waiting", line)

    def tool_started(self, call_id: str, name: str, arguments: dict[str, Any], description: str) -> None:
        self._call("tool_started", call_id, name, arguments, description)

    def tool_finished(self, call_id: str, ok: bool, failure: str = "") -> None:
        self._call("tool_finished", call_id, ok, failure)
