"""read_file and list_files: the model's view of one file or one folder of a snapshot.

Line numbers are 1-based and count "\n" only (as ripgrep does), so a line found by search has
the same number here. Lines are shown as `  12│ text`.

A snapshot holds processed files only (worker/repos/blob_process.py): text is already redacted,
so reading costs no redaction; a binary, oversized or withheld file is a small placeholder that
says what it was, which is what these tools show. Names are shown without control characters
(paths.shown_name).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pathspec

from worker.repos.manifest import Manifest, load_manifest
from worker.repos.placeholders import BINARY, OVERSIZED, PLACEHOLDER_MAX_BYTES, Placeholder, read_placeholder
from worker.repos.snapshot import Snapshot
from worker.repos.visible import hidden_name, secret_path, shown_name
from worker.tools.context import ToolContext, ToolError
from worker.tools.paths import human_size, not_found, resolve_path, walk
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
        data = absolute.read_bytes()
        text = "" if data.startswith(b"\x00") else data.decode("utf-8", errors="replace")
        lines = ctx.file_cache[(repo, relative)] = _split(text)
    return lines


def placeholder_of(absolute: Path, size: int | None = None) -> Placeholder | None:
    """What a snapshot file stands for when it is a placeholder (binary, oversized, withheld)."""
    try:
        if (size if size is not None else absolute.stat().st_size) > PLACEHOLDER_MAX_BYTES:
            return None
        with open(absolute, "rb") as handle:
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
    with open(absolute, "rb") as handle:
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
    """Read lines of one file in a repo, numbered, to see code in full and to cite it.

    Use it after search or list_files has shown a path. Long reads are capped (a few hundred
    lines); the reply then says which start_line to pass to continue. Read the part you need,
    e.g. 40 lines around a search hit, rather than whole large files. Cite what you read as
    [repo:path#L12-L30].

    Args:
        repo: the repo's name, as listed by list_repos
        path: the file's path relative to the repo root, e.g. "src/app/models.py"
        start_line: first line to show, counting from 1 (values below 1 are treated as 1)
        end_line: last line to show (inclusive); omit to read on from start_line as far as the cap
    """
    settings = ctx.settings
    snapshot = ctx.snapshot(repo)
    name = snapshot.repo.name
    absolute, relative = resolve_path(snapshot, path, settings)
    if not relative:
        raise ToolError("give the path of a file; use list_files to see what the repo holds")
    start = max(1, start_line)  # clamped: a 0 or -5 means "from the top"
    if end_line is not None and end_line < start:
        raise ToolError(
            f"end_line ({end_line}) is before start_line ({start}); pass end_line >= start_line or omit it"
        )

    lines = ctx.file_cache.get((name, relative))
    total: int
    if lines is None:
        if absolute.is_dir():
            raise ToolError(
                f"{relative!r} is a folder; call list_files with path={relative!r} to see inside it"
            )
        if not absolute.is_file():
            raise not_found(snapshot, relative, settings)
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
    width = len(str(min(total, start + len(lines))))
    # Leave room for the header and notices inside the whole-result cap.
    budget = min(settings.read_max_chars, settings.tool_output_max_chars - 600)
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
    last = start + len(shown) - 1
    ctx.shown.add(name, relative, range(start, last + 1))
    header = f"{name}:{shown_name(relative)} lines {start}-{last} of {total}"
    wanted_last = total if end_line is None else min(end_line, total)
    notices = []
    if last < wanted_last:
        why = (
            f"{settings.read_max_lines} lines"
            if len(shown) >= settings.read_max_lines
            else f"{budget:,} characters"
        )
        notices.append(f"[capped at {why}; call read_file with start_line={last + 1} to continue]")
    elif end_line is not None and end_line > total:
        notices.append(f"[the file ends at line {total}]")
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


class _Entry:
    """The parts of os.DirEntry that _entry_line uses, for a path taken from the manifest."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._stat = os.lstat(path)

    def is_symlink(self) -> bool:
        return stat.S_ISLNK(self._stat.st_mode)

    def is_dir(self, follow_symlinks: bool = True) -> bool:
        return stat.S_ISDIR(self._stat.st_mode)

    def stat(self, follow_symlinks: bool = True) -> os.stat_result:
        return self._stat


_PLACEHOLDER_NOTE = {BINARY: "binary", OVERSIZED: "too large to read"}


def _entry_line(
    entry: os.DirEntry[str] | _Entry, label: str, root: str, ctx: ToolContext
) -> tuple[str, dict[str, Any]] | None:
    """How one entry is listed (None: not at all); a symlink shows its target only when that
    stays in the repo, and is not listed when its target is a secret file."""
    shown = shown_name(label)
    if entry.is_symlink():
        target = os.path.realpath(entry.path)
        if target == root or target.startswith(root + os.sep):
            inside = os.path.relpath(target, root).replace(os.sep, "/")
            if inside != "." and secret_path(inside, ctx.settings) is not None:
                return None  # the link would show a secret file's name
            inside = "/" if inside == "." else inside + ("/" if os.path.isdir(target) else "")
            return f"{shown} -> {shown_name(inside)}", {"path": label, "type": "link", "target": inside}
        return f"{shown} -> (outside the repo; not readable)", {"path": label, "type": "link", "target": None}
    if entry.is_dir(follow_symlinks=False):
        try:
            count = sum(1 for _ in os.scandir(entry.path))
        except OSError:
            count = 0
        noun = "entry" if count == 1 else "entries"
        return f"{shown}/  ({count} {noun})", {"path": label + "/", "type": "dir", "entries": count}
    size = entry.stat(follow_symlinks=False).st_size
    held = placeholder_of(Path(entry.path), size)
    if held is not None:
        note = _PLACEHOLDER_NOTE.get(held.kind, "withheld: never shown")
        data = {"path": label, "type": "file", "size_bytes": held.size, held.kind: True}
        return f"{shown}  ({human_size(held.size)}, {note})", data
    return f"{shown}  ({human_size(size)})", {"path": label, "type": "file", "size_bytes": size}


def _glob_from_manifest(
    ctx: ToolContext,
    manifest: Manifest,
    spec: pathspec.PathSpec,
    root: str,
    folder: str,
    rows: list[tuple[str, dict[str, Any]]],
) -> int:
    """Matches of `spec` below `folder` ("." for the root) from the snapshot's manifest: only the
    rows shown touch the disk. The count of every match."""
    folder = "" if folder == "." else folder.replace(os.sep, "/")
    skip = len(folder) + 1 if folder else 0
    total = 0
    for entry in manifest.under(folder):
        if not spec.match_file(entry.path[skip:]):
            continue
        if len(rows) < ctx.settings.list_max_entries:
            try:
                line = _entry_line(_Entry(os.path.join(root, entry.path)), entry.path, root, ctx)
            except OSError:
                line = None
            if line is None:
                continue
            rows.append(line)
        total += 1
    return total


def _glob_by_walking(
    ctx: ToolContext,
    spec: pathspec.PathSpec,
    root: str,
    absolute: Path,
    rows: list[tuple[str, dict[str, Any]]],
    truncated: list[bool],
) -> int:
    """Matches of `spec` below `absolute`, walking the tree (at most list_walk_max_entries)."""
    total = 0
    for path_from_root, entry in walk(Path(root), absolute, ctx.settings, truncated):
        below = os.path.relpath(entry.path, absolute).replace(os.sep, "/")
        if spec.match_file(below):
            line = _entry_line(entry, path_from_root, root, ctx)
            if line is None:
                continue
            total += 1
            if len(rows) < ctx.settings.list_max_entries:
                rows.append(line)
    return total


def list_files(ctx: ToolContext, repo: str, path: str = "", glob: str | None = None) -> ToolResult:
    """List a folder of a repo with file sizes, or find files by name pattern.

    Without glob: the folder's own entries (folders end with '/'). With glob: every file under
    the folder whose path matches, at any depth, using .gitignore-style patterns: "*.py",
    "test_*.py", "src/**/config*", "Dockerfile". Use it to find where things live; use search
    to find text inside files.

    Args:
        repo: the repo's name, as listed by list_repos
        path: folder to list, relative to the repo root; omit for the root
        glob: optional file name pattern to match recursively, e.g. "*.go" or "**/migrations/*.sql"
    """
    settings = ctx.settings
    snapshot = ctx.snapshot(repo)
    name = snapshot.repo.name
    absolute, relative = resolve_path(snapshot, "" if path.strip() in ("/", "./") else path, settings)
    if not absolute.exists():
        raise not_found(snapshot, relative, settings)
    if not absolute.is_dir():
        raise ToolError(f"{relative!r} is a file, not a folder; call read_file to read it")
    root = os.path.realpath(snapshot.root)
    where = f"{name}:{shown_name(relative) or '.'}/"
    rows: list[tuple[str, dict[str, Any]]] = []
    hidden = 0
    total = 0
    if glob:
        if len(glob) > settings.pattern_max_chars:
            raise ToolError(
                f"the glob is longer than {settings.pattern_max_chars} characters; use a shorter one"
            )
        try:
            spec = pathspec.GitIgnoreSpec.from_lines([glob])
        except Exception as exc:  # pathspec raises several types for a malformed pattern
            raise ToolError(
                f"invalid glob {glob!r} ({exc}); use a pattern like '*.py' or 'src/**/test_*.py'"
            ) from None
        truncated: list[bool] = []
        manifest = load_manifest(snapshot.root)
        if manifest is not None:
            total = _glob_from_manifest(ctx, manifest, spec, root, os.path.relpath(absolute, root), rows)
        else:  # a snapshot built before manifests: walk it
            total = _glob_by_walking(ctx, spec, root, absolute, rows, truncated)
        title = f"{where} files matching {glob!r}: {'at least ' if truncated else ''}{total}"
        if truncated:
            title += (
                f" (stopped after looking at {settings.list_walk_max_entries:,} entries; pass a deeper path)"
            )
    else:
        with os.scandir(absolute) as scan:
            entries = sorted(scan, key=lambda e: (not e.is_dir(follow_symlinks=False), e.name))
        for entry in entries:
            line = None if hidden_name(entry.name, settings) else _entry_line(entry, entry.name, root, ctx)
            if line is None:
                hidden += 1
                continue
            total += 1
            if len(rows) < settings.list_max_entries:
                rows.append(line)
        title = f"{where} {total} entries"
    lines = [title, *(row for row, _ in rows)]
    if not total:
        lines.append("(nothing here)" if not glob else "(no match; try a looser glob like '*name*')")
    if total > len(rows):
        lines.append(f"[showing {len(rows)} of {total}; pass a deeper path or a glob to narrow]")
    if hidden:
        lines.append(f"[{hidden} entries not listed: .git or secret files, which are never readable]")
    if not relative and not glob and snapshot.meta.withheld:
        lines.append(
            f"[{snapshot.meta.withheld} secret or credentials file(s) in this repo are withheld: "
            "never listed, searched or read]"
        )
    data = {"repo": name, "path": relative, "glob": glob, "total": total, "entries": [d for _, d in rows]}
    return finish(ctx, "\n".join(lines), data)
