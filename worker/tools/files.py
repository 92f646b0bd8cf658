"""read_file: the model's view of lines of one file of a snapshot (list_files is in listing.py).

Line numbers are 1-based and count "\n" only (as ripgrep does), so a line found by search has
the same number here. Lines are shown as `  12│ text`.

A snapshot holds processed files only (worker/repos/blob_process.py): text is already redacted,
so reading costs no redaction; a binary, oversized or withheld file is a small placeholder that
says what it was, which is what these tools show. Names are shown without control characters
(paths.shown_name).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from config.settings import Settings
from worker.repos.placeholders import BINARY, OVERSIZED, PLACEHOLDER_MAX_BYTES, Placeholder, read_placeholder
from worker.repos.regular_files import open_regular, read_regular, special_kind
from worker.repos.snapshot import Snapshot
from worker.repos.visible import shown_name
from worker.tools.context import ToolContext, ToolError
from worker.tools.paths import human_size, not_found, resolve_path
from worker.tools.redact import finish
from worker.tools.registry import ToolResult

_BINARY_KINDS = {
    ".png": "PNG image",
    ".jpg": "JPEG image",
    ".jpeg": "JPEG image",
    ".gif": "GIF image",
    ".webp": "WebP image",
    ".ico": "icon",
    ".bmp": "bitmap image",
    ".pdf": "PDF document",
    ".zip": "zip archive",
    ".gz": "gzip archive",
    ".tgz": "gzip tar archive",
    ".tar": "tar archive",
    ".bz2": "bzip2 archive",
    ".xz": "xz archive",
    ".7z": "7-Zip archive",
    ".jar": "Java archive",
    ".whl": "Python wheel",
    ".so": "shared library",
    ".dll": "Windows library",
    ".dylib": "macOS library",
    ".exe": "Windows executable",
    ".o": "object file",
    ".a": "static library",
    ".pyc": "compiled Python",
    ".class": "Java class file",
    ".wasm": "WebAssembly module",
    ".woff": "web font",
    ".woff2": "web font",
    ".ttf": "TrueType font",
    ".otf": "OpenType font",
    ".mp3": "MP3 audio",
    ".mp4": "MP4 video",
    ".sqlite": "SQLite database",
    ".db": "database file",
    ".bin": "binary data",
}


NOT_REGULAR_HINT = "a snapshot should hold none; an operator can check the worker's disk"


def _split(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line does not start another
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def cached_lines(ctx: ToolContext, repo: str, relative: str, absolute: Path) -> list[str]:
    """A text file's lines (redacted at rest), read from disk at most once per question.
    Only for files up to read_cache_max_file_bytes; a placeholder has no lines."""
    lines = ctx.file_cache.get((repo, relative))
    if lines is None:
        data = read_regular(absolute)
        text = "" if data.startswith(b"\x00") else data.decode("utf-8", errors="replace")
        lines = ctx.file_cache[(repo, relative)] = _split(text)
    return lines


def placeholder_of(absolute: Path, size: int | None = None) -> Placeholder | None:
    """What a snapshot file stands for when it is a placeholder (binary, oversized, withheld)."""
    try:
        if (size if size is not None else absolute.stat().st_size) > PLACEHOLDER_MAX_BYTES:
            return None
        with open_regular(absolute) as handle:
            return read_placeholder(handle.read(PLACEHOLDER_MAX_BYTES))
    except OSError:
        return None


def _stream_window(absolute: Path, first: int, last: int) -> tuple[list[str], int]:
    """Lines first..last of a big file and its line count, reading line by line instead of
    loading the file."""
    low = max(1, first)
    high = last
    window: list[bytes] = []
    count = 0
    with open_regular(absolute) as handle:
        for count, raw in enumerate(handle, 1):
            if count >= low:
                window.append(raw)
            if count >= high:
                break
        # Count the rest without splitting it into lines.
        rest_ends_with_newline = None
        while chunk := handle.read(1 << 20):
            count += chunk.count(b"\n")
            rest_ends_with_newline = chunk.endswith(b"\n")
        if rest_ends_with_newline is False:
            count += 1  # a last line without a newline
    lines = _split(b"".join(window).decode("utf-8", errors="replace"))
    return lines[: last - low + 1], count


def _describe_placeholder(
    repo: str, relative: str, absolute: Path, held: Placeholder
) -> tuple[str, dict[str, Any]]:
    shown = f"{repo}:{shown_name(relative)}"
    data: dict[str, Any] = {"repo": repo, "path": relative, "size_bytes": held.size}
    if held.kind == BINARY:
        kind = _BINARY_KINDS.get(absolute.suffix.lower(), "binary data")
        text = (
            f"{shown} is a binary file ({kind}, {human_size(held.size)}); its content is not shown. "
            "Search for where it is used instead."
        )
        return text, {**data, "binary": True, "kind": kind}
    if held.kind == OVERSIZED:
        text = (
            f"{shown} is too large to read ({human_size(held.size)}): its content is not kept "
            f"({held.reason}). Search for where it is used instead."
        )
        return text, {**data, "oversized": True}
    reason = held.reason or "it holds credentials"
    text = f"{shown} is withheld: {reason}. Its content is never shown; do not guess it."
    return text, {**data, "withheld": True, "reason": reason}


def read_file(
    ctx: ToolContext, repo: str, path: str, start_line: int = 1, end_line: int | None = None
) -> ToolResult:
    """Read numbered lines of one file, to see code in full and to cite it.

    Long reads are capped (a few hundred lines) and the reply says which start_line continues.
    Read the part you need, e.g. 40 lines around a search hit, not whole large files.

    Args:
        repo: the repo's name
        path: the file's path relative to the repo root, e.g. "src/app/models.py"
        start_line: first line to show, from 1
        end_line: last line to show (inclusive); omit to read on as far as the cap
    """
    settings = ctx.settings
    snapshot = ctx.snapshot(repo)
    name = snapshot.repo.name
    absolute, relative = resolve_path(snapshot, path, settings)
    if not relative:
        raise ToolError("give the path of a file; use list_files to see what the repo holds")
    start = _first_line(start_line, end_line)
    lines = ctx.file_cache.get((name, relative))
    if lines is None:
        _check_is_file(snapshot, relative, absolute, settings)
        size = absolute.stat().st_size
        held = placeholder_of(absolute, size)
        if held is not None:
            return finish(ctx, *_describe_placeholder(name, relative, absolute, held))
        if size > settings.read_cache_max_file_bytes:
            last = start + settings.read_max_lines - 1
            if end_line is not None:
                last = min(last, end_line)
            window, total = _stream_window(absolute, start, last)
            return _render(ctx, snapshot, relative, window, start, total, end_line)
        lines = cached_lines(ctx, name, relative, absolute)
    total = len(lines)
    last = total if end_line is None else min(end_line, total)
    return _render(ctx, snapshot, relative, lines[start - 1 : last], start, total, end_line)


def _first_line(start_line: int, end_line: int | None) -> int:
    """The first line to show; a start below 1 means "from the top", an end before it is refused."""
    start = max(1, start_line)
    if end_line is not None and end_line < start:
        raise ToolError(
            f"end_line ({end_line}) is before start_line ({start}); pass end_line >= start_line or omit it"
        )
    return start


def _check_is_file(snapshot: Snapshot, relative: str, absolute: Path, settings: Settings) -> None:
    """Refuse a folder, a missing file or anything else that is not a regular file, saying what
    to call instead."""
    if absolute.is_dir():
        raise ToolError(f"{relative!r} is a folder; call list_files with path={relative!r} to see inside it")
    kind = special_kind(absolute)
    if kind is not None:  # never opened: a FIFO's open or read would wait for a writer forever
        raise ToolError(f"{relative!r} is not a regular file ({kind}), so it is not read: {NOT_REGULAR_HINT}")
    if not absolute.is_file():
        raise not_found(snapshot, relative, settings)


def _render(
    ctx: ToolContext,
    snapshot: Snapshot,
    relative: str,
    lines: list[str],
    start: int,
    total: int,
    end_line: int | None,
) -> ToolResult:
    settings = ctx.settings
    name = snapshot.repo.name
    if total == 0:
        return finish(
            ctx,
            f"{name}:{shown_name(relative)} is empty (0 lines).",
            {"repo": name, "path": relative, "lines": []},
        )
    if start > total:
        raise ToolError(
            f"start_line {start} is past the end: {relative!r} has {total} lines; pass start_line <= {total}"
        )
    shown, records = _numbered(lines, start, total, settings)
    last = start + len(shown) - 1
    ctx.shown.add(name, relative, range(start, last + 1))
    header = f"{name}:{shown_name(relative)} lines {start}-{last} of {total}"
    notices = _end_notices(settings, len(shown), last, total, end_line)
    text = "\n".join([header, *shown, *notices])
    data = {
        "repo": name,
        "path": relative,
        "start_line": start,
        "end_line": last,
        "total_lines": total,
        "lines": records,
    }
    return finish(ctx, text, data)


def _read_budget(settings: Settings) -> int:
    """The characters of numbered lines one read shows: room is left for the header and notices
    inside the whole-result cap."""
    return min(settings.read_max_chars, settings.tool_output_max_chars - 600)


def _numbered(
    lines: list[str], start: int, total: int, settings: Settings
) -> tuple[list[str], list[dict[str, Any]]]:
    """The lines as shown (`  12│ text`, over-long lines cut) and as data, up to the line cap
    and the character budget."""
    width = len(str(min(total, start + len(lines))))
    budget = _read_budget(settings)
    shown: list[str] = []
    records: list[dict[str, Any]] = []
    used = 0
    for offset, line in enumerate(lines[: settings.read_max_lines]):
        number = start + offset
        if len(line) > settings.read_max_line_chars:
            line = line[: settings.read_max_line_chars] + f" …[line cut: {len(line):,} chars]"
        formatted = f"{number:>{width}}│ {line}"
        if shown and used + len(formatted) + 1 > budget:
            break
        shown.append(formatted)
        records.append({"line": number, "text": line})
        used += len(formatted) + 1
    return shown, records


def _end_notices(settings: Settings, shown: int, last: int, total: int, end_line: int | None) -> list[str]:
    """What follows the lines: how to continue a capped read, or that the file ends early."""
    wanted_last = total if end_line is None else min(end_line, total)
    if last < wanted_last:
        why = (
            f"{settings.read_max_lines} lines"
            if shown >= settings.read_max_lines
            else f"{_read_budget(settings):,} characters"
        )
        return [f"[capped at {why}; call read_file with start_line={last + 1} to continue]"]
    if end_line is not None and end_line > total:
        return [f"[the file ends at line {total}]"]
    return []
