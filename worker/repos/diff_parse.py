"""git's patch output parsed: which files changed (raw entries, numstat), and each file's hunks.

Only the *structure* is kept (which lines were added, removed or kept, by number): the lines
shown are filled from processed file versions (worker/repos/history_content.py), never from
git's own text of a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from worker.repos.history import RawEntry, path_text

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_INDEX = re.compile(r"^index ([0-9a-f]{40})\.\.([0-9a-f]{40})")


@dataclass
class Hunk:
    old_start: int
    new_start: int
    lines: list[tuple[str, int | None, int | None]]  # (" ", "+", "-" or "\\", old number, new number)


@dataclass
class Section:
    """One file's part of a patch: its blob shas (from `index`), whether git found it binary, hunks."""

    old_sha: str | None
    new_sha: str | None
    binary: bool
    hunks: list[Hunk]


@dataclass
class ParsedDiff:
    entries: list[RawEntry]
    sections: list[Section | None]  # per entry: its section, or None when it has none or it was cut
    cut: bool  # git's output was capped: later sections are missing


def parse_diff(data: bytes, cut: bool) -> ParsedDiff:
    """`git diff-tree -r -z --raw --numstat -p --full-index --no-abbrev` output, in that order."""
    entries, at = _raw_entries(data)
    at = _numstat(data, at, entries)
    if data[at : at + 1] == b"\0":
        at += 1
    sections = _sections(data[at:].decode("utf-8", "replace"))
    return ParsedDiff(entries, _match_sections(entries, sections), cut)


def _next_token(data: bytes, at: int) -> tuple[bytes | None, int]:
    end = data.find(b"\0", at)
    return (None, at) if end < 0 else (data[at:end], end + 1)


def _raw_entries(data: bytes) -> tuple[list[RawEntry], int]:
    entries: list[RawEntry] = []
    at = 0
    while data[at : at + 1] == b":":
        head_token, after = _next_token(data, at)
        head = head_token[1:].split() if head_token else []
        if len(head) != 5:
            break
        status = head[4].decode()
        paths: list[str] = []
        for _ in range(2 if status[:1] in ("R", "C") else 1):
            path, after = _next_token(data, after)
            if path is None:
                return entries, len(data)
            paths.append(path_text(path))
        entries.append(
            RawEntry(head[0].decode(), head[1].decode(), head[2].decode(), head[3].decode(), status, paths[0],
                     paths[-1])
        )  # fmt: skip
        at = after
    return entries, at


def _numstat(data: bytes, at: int, entries: list[RawEntry]) -> int:
    for entry in entries:
        token, after = _next_token(data, at)
        if token is None:
            return len(data)
        counts = token.split(b"\t")
        if len(counts) < 3:
            return at
        if counts[0].isdigit() and counts[1].isdigit():
            entry.added, entry.deleted = int(counts[0]), int(counts[1])
        at = after
        if counts[2] == b"":  # a rename: the two paths follow as tokens of their own
            for _ in range(2):
                _, at = _next_token(data, at)
    return at


def _sections(patch: str) -> list[Section]:
    sections: list[Section] = []
    current: Section | None = None
    hunk: Hunk | None = None
    old = new = 0
    for line in patch.split("\n"):
        if line.startswith("diff --git "):
            current = Section(None, None, False, [])
            sections.append(current)
            hunk = None
        elif current is None:
            continue
        elif hunk is None or line[:1] not in (" ", "+", "-", "\\"):
            if match := _HUNK.match(line):
                old, new = int(match.group(1)), int(match.group(3))
                hunk = Hunk(old, new, [])
                current.hunks.append(hunk)
            elif hunk is None and (index := _INDEX.match(line)):
                current.old_sha, current.new_sha = index.group(1), index.group(2)
            elif hunk is None and line.startswith("Binary files "):
                current.binary = True
        elif line.startswith(" "):
            hunk.lines.append((" ", old, new))
            old, new = old + 1, new + 1
        elif line.startswith("-"):
            hunk.lines.append(("-", old, None))
            old += 1
        elif line.startswith("+"):
            hunk.lines.append(("+", None, new))
            new += 1
        else:
            hunk.lines.append(("\\", None, None))
    return sections


def _match_sections(entries: list[RawEntry], sections: list[Section]) -> list[Section | None]:
    """Each entry's section, in order (a type change has two: the old kind removed, the new added).

    A section whose blob shas are not the entry's ends the matching: the entries from there on
    get none (their diff is not shown rather than shown against the wrong file)."""
    matched: list[Section | None] = []
    queue = list(sections)
    for entry in entries:
        if not queue:
            matched.append(None)
            continue
        if entry.status == "T" and len(queue) >= 2:
            removed, added = queue.pop(0), queue.pop(0)
            ok = removed.old_sha in (None, entry.old_sha) and added.new_sha in (None, entry.new_sha)
            matched.append(Section(entry.old_sha, entry.new_sha, removed.binary or added.binary,
                                   [*removed.hunks, *added.hunks]) if ok else None)  # fmt: skip
        else:
            section = queue.pop(0)
            ok = section.old_sha in (None, entry.old_sha) and section.new_sha in (None, entry.new_sha)
            matched.append(section if ok else None)
        if matched[-1] is None:
            matched.extend(None for _ in range(len(entries) - len(matched)))
            break
    return matched


def diff_args(base: str | None, target: str, path: str | None) -> list[str]:
    """`git diff-tree` arguments for the changes from `base` (None: the empty tree) to `target`."""
    args = ["diff-tree", "-r", "-z", "--raw", "--numstat", "-p", "--full-index", "--no-abbrev", "-M",
            "--no-color", "--no-ext-diff", "--no-textconv", "-U3"]  # fmt: skip
    args += ["--root", "--no-commit-id", target] if base is None else [base, target]
    return [*args, "--", path] if path else args
