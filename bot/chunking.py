"""Splitting a long answer into chat messages without ever breaking a code block.

Pure text in, texts out; each platform wraps it with its own limit and its own idea of where an
overlong line may be cut (Slack must not cut inside a `<url|link>` or an `&amp;` entity).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

LineCutter = Callable[[str, int], list[str]]

MAX_REOPEN_CHARS = 40  # a reopened fence keeps at most this much of its opening line
MIN_FILL = 0.4  # by default a message is filled at least this much before breaking at a paragraph end

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


@dataclass(frozen=True)
class _Line:
    text: str
    open_before: str | None  # the fence line of the code block this line starts inside, if any
    open_after: str | None  # the same after this line


def annotate(lines: Iterable[str]) -> list[_Line]:
    """Each line with the fence of the code block it starts and ends inside (None: outside)."""
    out: list[_Line] = []
    opener: str | None = None
    for text in lines:
        before = opener
        match = _FENCE.match(text)
        if match:
            marker = match.group(1)
            if opener is None:
                opener = text.strip()
            else:
                open_marker = _FENCE.match(opener)
                assert open_marker is not None
                om = open_marker.group(1)
                if marker[0] == om[0] and len(marker) >= len(om) and not match.group(2).strip():
                    opener = None
        out.append(_Line(text, before, opener))
    return out


def _closer(opener: str) -> str:
    match = _FENCE.match(opener)
    assert match is not None
    return match.group(1)


def _reopen(opener: str) -> str:
    return opener[:MAX_REOPEN_CHARS]


def _render(start_open: str | None, lines: list[_Line]) -> str:
    parts = [_reopen(start_open)] if start_open else []
    parts.extend(line.text for line in lines)
    end_open = lines[-1].open_after if lines else start_open
    if end_open:
        parts.append(_closer(end_open))
    return "\n".join(parts)


def cut_long_line(text: str, limit: int) -> list[str]:
    """Cut at the last space in the second half of the window, else hard at the limit."""
    pieces: list[str] = []
    while len(text) > limit:
        cut = text.rfind(" ", limit // 2, limit)
        cut = cut if cut > 0 else limit
        pieces.append(text[:cut])
        text = text[cut:].lstrip(" ") if cut < limit else text[cut:]
    pieces.append(text)
    return pieces


def _break_index(start_open: str | None, buf: list[_Line], limit: int, min_fill: float) -> int:
    """How many lines of buf go in this message: a late blank line or code-block end if any."""
    minimum = int(limit * min_fill)
    for n in range(len(buf) - 1, 0, -1):
        line = buf[n - 1]
        paragraph_end = buf[n].text.strip() == "" and buf[n].open_before is None and buf[n].open_after is None
        block_end = line.open_before is not None and line.open_after is None
        if (paragraph_end or block_end) and len(_render(start_open, buf[:n])) >= minimum:
            return n
    last = buf[-1]
    if len(buf) > 1 and last.open_before is None and last.open_after is not None:
        return len(buf) - 1  # a code block's opening line goes with its first lines
    return len(buf)


def split_keeping_code_blocks(
    text: str, limit: int, cut_line: LineCutter = cut_long_line, min_fill: float = MIN_FILL
) -> list[str]:
    """Split text into messages of at most `limit` characters. A code block cut between two
    messages is closed at the end of the first and reopened (with its language) at the start of
    the next; messages break after a paragraph or a code block where they can. `cut_line`
    splits a line longer than any message may hold (platforms know where a cut is safe);
    `min_fill` 0 breaks at the last paragraph or block end, so a block that does not fit the
    current message starts the next one."""
    line_limit = limit - 2 * (MAX_REOPEN_CHARS + 1) - 8  # room to close and reopen a fence
    raw: list[str] = []
    for text_line in text.strip("\n").split("\n"):
        raw.extend(cut_line(text_line, line_limit))
    chunks: list[str] = []
    start_open: str | None = None
    buf: list[_Line] = []
    for line in annotate(raw):
        while buf and len(_render(start_open, [*buf, line])) > limit:
            n = _break_index(start_open, buf, limit, min_fill)
            chunks.append(_render(start_open, buf[:n]))
            start_open = buf[n - 1].open_after
            rest = buf[n:]
            while rest and rest[0].text.strip() == "" and rest[0].open_before is None:
                rest = rest[1:]  # a message never starts with blank lines
            buf = rest
        buf.append(line)
    if buf:
        chunks.append(_render(start_open, buf))
    return [c for c in chunks if c.strip()]
