"""Where a rule can match at all: the lines holding one of its keywords (see `Rule.lines_after`).

A rule such as `secret-assignment` has keywords (`key`, `pass`, `token`…) that occur in almost
every code file, so the keyword pre-filter lets it run on nearly every blob; run over the whole
text its RE2 automaton (a key of up to 80 characters, then a separator, then a value) is the
costliest step of redacting a blob. When every match of a rule holds one of its keywords on its
first line and spans at most `n` line breaks after it, only the lines holding a keyword, and the
`n` lines below each, can hold a match: `windows` finds them (for all the rules with the same
bound at once: the union of their keywords) and the engine runs each rule over those windows
only (`finditer(text, pos, endpos)`), with the same matches.

Why the matches are the same: RE2 searches a window of the text with the whole text as context
(`^`, `$` and `\\b` at the window's edges see the characters beyond it;
tests/test_redaction_windows.py checks it), windows are whole lines, and windows that touch are
merged, so inside a window the search takes exactly the steps it takes over the whole text, and
outside the windows there is no match to find. Lines without a keyword inside a window change
nothing (they hold no match), so windows may be wider than needed: a window takes in the lines
up to `_SCAN_AHEAD` bytes past its keyword, and windows closer than that are merged; a few more
bytes for the automaton cost less than another window. This bounds the number of windows (and
of Python steps) by the text's length / `_SCAN_AHEAD`, whatever the input; a window that keeps
meeting keywords doubles its reach, so a text dense with them takes a few steps.
"""

from __future__ import annotations

import re2

# A window reaches at least this many bytes past the keyword that opened it (see above).
_SCAN_AHEAD = 64


class KeywordLines:
    """The windows of a text that rules with these keywords and this `lines_after` must search."""

    def __init__(self, keywords: tuple[str, ...], lines_after: int) -> None:
        if not keywords or any("\n" in k or not k for k in keywords):
            raise ValueError(
                f"keywords of a line-bounded rule must be non-empty, one line each: {keywords!r}"
            )
        self.lines_after = lines_after
        # Case-insensitive like the engine's keyword set: the same case folding as the rules' (?i).
        options = re2.Options()
        options.case_sensitive = False
        longest_first = sorted(set(keywords), key=lambda k: (-len(k), k))
        self._finder = re2.compile("|".join(re2.escape(k) for k in longest_first), options=options)

    def windows(self, data: bytes) -> list[tuple[int, int]]:
        """Disjoint, ascending [start, end) ranges of whole lines covering every line that holds a
        keyword and the `lines_after` lines below it (each range ends after a "\\n" or at the end)."""
        windows: list[tuple[int, int]] = []
        size = len(data)
        pos = 0  # always the start of a line: a keyword (one line) cannot straddle it
        while pos < size:
            hit = self._finder.search(data, pos)
            if hit is None:
                break
            start = data.rfind(b"\n", pos, hit.start()) + 1 or pos
            if windows and start - windows[-1][1] <= _SCAN_AHEAD:  # a short gap costs less than a window
                # Keywords close together: reach as far again as the window already does, so a
                # text dense with keywords takes a few steps, not one per line.
                first = windows.pop()[0]
                end = self._window_end(data, hit.start(), max(_SCAN_AHEAD, pos - first))
                windows.append((first, end))
            else:
                windows.append((start, self._window_end(data, hit.start(), _SCAN_AHEAD)))
            pos = windows[-1][1]
        return windows

    def _window_end(self, data: bytes, hit: int, ahead: int) -> int:
        """Just after the "\\n" ending the `lines_after`-th line below the hit's line, and after
        the line holding hit + ahead; the text's end if it comes first."""
        end = hit
        for _ in range(self.lines_after + 1):
            end = data.find(b"\n", end) + 1
            if not end:
                return len(data)
        if end <= hit + ahead:
            end = data.find(b"\n", hit + ahead) + 1 or len(data)
        return end
