"""Sections of docs/ generated from the code (between a START and an END comment), so a fact the
docs list cannot drift from what the code does: a test compares `documented` with the section the
code would write, and `rewrite` is what a module's `python -m` runs to bring the page up to date."""

from __future__ import annotations

import sys
from pathlib import Path


def documented(text: str, start: str, end: str) -> str:
    """The generated section as it stands in a document ('' if it has none)."""
    if start not in text or end not in text:
        return ""
    return text[text.index(start) : text.index(end) + len(end)]


def rewrite(doc: Path, start: str, end: str, section: str) -> None:
    """Replace `doc`'s generated section with `section`; exits naming the markers when it has none."""
    text = doc.read_text(encoding="utf-8")
    current = documented(text, start, end)
    if not current:
        sys.exit(f"{doc} has no {start} ... {end} section")
    doc.write_text(text.replace(current, section), encoding="utf-8")
