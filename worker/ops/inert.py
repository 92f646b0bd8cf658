"""Text of others made inert before it reaches a terminal or a log line.

Commit authors and messages, feedback reasons, repo content, questions and model output are
hostile: an ESC starts a terminal control sequence (OSC 8 makes a foreign hyperlink, OSC 52
writes the clipboard, CSI moves the cursor over earlier lines), a C1 control is the same in
8-bit form, a carriage return or backspace overwrites what was printed, bidirectional
overrides reorder a line, and a newline in a log message forges a log line.

- `inert(text)` removes all of them except tab and newline: for a terminal.
- `inert_line(text)` shows each as a visible escape (`\\x1b`, `\\n`), newlines included: for
  one log line that stays one line and still says what was there.
- `TerminalGuard` wraps a stream a Rich console writes to: it passes the SGR (colour) and
  cursor sequences Rich itself writes and drops every other escape sequence (OSC, DCS, APC,
  any other ESC or C1), whatever path a text took to it.
"""

from __future__ import annotations

import re
from typing import Any, TextIO

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional formatting characters.
_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[{_CONTROL}]")
_UNSAFE_IN_A_LINE = re.compile(f"[{_CONTROL}\n\t]")
# What Rich writes itself: SGR styles, cursor show/hide, moves and line erases (Live, Progress).
_RICH_SEQUENCE = re.compile(r"\x1b\[(?:[0-9;]*m|\?25[lh]|[0-9]*[ABCDGK]|2K)")
_ANY_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC, DCS, SOS, PM, APC up to BEL or ST
    r"|\x1b[ -/]*[0-~]?"  # any other ESC sequence, or a lone ESC
    r"|[\x80-\x9f]"  # C1 controls (8-bit CSI, OSC, …)
)


def inert(text: str) -> str:
    """`text` without control characters (tab and newline kept)."""
    return _UNSAFE.sub("", text)


def inert_line(text: str) -> str:
    """`text` as one line: every control character, newline and tab included, as a visible escape."""
    return _UNSAFE_IN_A_LINE.sub(lambda m: repr(m.group(0))[1:-1], text)


def json_without_controls(document: str) -> str:
    """A JSON text with every control character left raw by `ensure_ascii=False` (C1, bidi) as `\\uXXXX`."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", document)


def _keep_rich_sequences(match: re.Match[str]) -> str:
    return match.group(0) if _RICH_SEQUENCE.fullmatch(match.group(0)) else ""


class TerminalGuard:
    """A text stream that drops every escape sequence but Rich's own styling and cursor moves."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(_ANY_SEQUENCE.sub(_keep_rich_sequences, text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, flush, encoding: the stream's
        return getattr(self._stream, name)
