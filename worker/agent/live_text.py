"""The model's text as it may be shown while it is still being written.

A sink that streams an answer (Slack's chat streaming, Discord's progressive edits) must show
nothing a full post would not: every secret redacted, every citation checked before it is a
link, every look-alike unlinked. Deltas arrive in arbitrary pieces (a secret or a citation can
be split across two), so nothing is judged per delta. `LiveText` keeps the raw text of the
current model turn and, when asked, shows its *stable* part: the raw text up to a point where
no construct is still open, with the last `holdback_chars` characters (and the word being
written) held back. That part is redacted whole and its citations checked whole, exactly as
the final answer is (`redact`, then `check`), so a secret split across deltas is redacted and
a citation resolves into a link or the unverified mark only once it is complete.

What is held back (worker/agent/citations.py is the other half of the rule):
- the word being written, and at least `holdback_chars` characters: a secret is a word, and a
  redaction rule that looks a little further right still sees its context;
- an unclosed `[` on the current line: a citation `[repo:path#L3]`, or a Markdown link's label;
- a `[label](` whose `)` has not come: the link's target decides whether it is kept;
- an unclosed `<` on the current line: an autolink, or a platform's control sequence.

Shown text only grows within a turn as long as the redaction and the check agree with what
they said of a shorter prefix; the caller compares and stops showing the turn when they do
not (the final answer then replaces it). `snapshot()` is thread-safe: the agent feeds deltas
on its thread, a sink's sender reads on its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

_OPENERS = {"[": "]", "<": ">"}


@dataclass(frozen=True)
class Shown:
    turn: int  # which model turn this text belongs to (a new turn starts from nothing)
    markdown: str  # redacted, citations checked: safe to show (after the platform's escaping)
    complete: bool  # the whole raw text of the turn is in it (nothing held back)


def stable_end(raw: str, holdback_chars: int) -> int:
    """How much of `raw` can be judged now: up to the last whitespace before the held-back
    window, and before any construct still open on the current line."""
    end = len(raw) - holdback_chars
    if end <= 0:
        return 0
    while end > 0 and not raw[end - 1].isspace():
        end -= 1
    line_start = raw.rfind("\n", 0, end) + 1
    return min(end, _first_open(raw, line_start, end))


def _first_open(raw: str, start: int, end: int) -> int:
    """The position of the earliest construct opened in raw[start:end] that raw[start:end]
    does not close: an unclosed `[` or `<`, or a `[label](` without its `)`."""
    stack: list[tuple[str, int]] = []
    link_at: int | None = None  # the `[` of a `[label](` whose target is still open
    index = start
    while index < end:
        char = raw[index]
        if link_at is not None:
            if char == ")" or char == "\n":
                link_at = None
        elif char in _OPENERS:
            stack.append((_OPENERS[char], index))
        elif stack and char == stack[-1][0]:
            closer, opened = stack.pop()
            if closer == "]" and index + 1 < end and raw[index + 1] == "(":
                link_at = opened
                index += 1
        index += 1
    opened_at = [position for _closer, position in stack]
    if link_at is not None:
        opened_at.append(link_at)
    return min(opened_at, default=end)


class LiveText:
    """The current model turn's text, fed delta by delta, shown in its stable part."""

    def __init__(
        self, redact: Callable[[str], str], check: Callable[[str], str], holdback_chars: int
    ) -> None:
        self._redact = redact
        self._check = check
        self._holdback = holdback_chars
        self._lock = threading.Lock()
        self._raw = ""
        self._turn = 0
        self._finished = False

    def new_turn(self) -> None:
        """A model turn starts (also a retried one): its text starts from nothing."""
        with self._lock:
            self._turn += 1
            self._raw = ""
            self._finished = False

    def feed(self, delta: str) -> None:
        with self._lock:
            self._raw += delta

    def finish_turn(self) -> None:
        """The turn's text is complete (it called tools, or it ended): show all of it."""
        with self._lock:
            self._finished = True

    @property
    def turn(self) -> int:
        with self._lock:
            return self._turn

    def snapshot(self) -> Shown:
        with self._lock:
            turn, raw, finished = self._turn, self._raw, self._finished
        end = len(raw) if finished else stable_end(raw, self._holdback)
        stable = raw[:end]
        markdown = self._check(self._redact(stable)) if stable.strip() else ""
        return Shown(turn=turn, markdown=markdown, complete=end == len(raw))
