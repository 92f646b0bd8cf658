"""list_files: the model's view of one folder of a snapshot, or of the files matching a glob.

Names are shown without control characters (paths.shown_name); a glob matches the names as
shown, redacted (worker/tools/visible_paths.py); .git and secret files are never listed, and a placeholder (binary, oversized, withheld: worker/repos/placeholders.py) is listed
as what it stands for.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pathspec

from config.settings import Settings
from worker.repos.manifest import Manifest, load_manifest
from worker.repos.placeholders import BINARY, OVERSIZED
from worker.repos.snapshot import Snapshot
from worker.repos.visible import hidden_name, secret_path, shown_name
from worker.tools.context import ToolContext, ToolError
from worker.tools.files import placeholder_of
from worker.tools.paths import human_size, not_found, resolve_path, walk
from worker.tools.redact import finish
from worker.tools.registry import ToolResult
from worker.tools.visible_paths import (
    NONE,
    RedactedPaths,
    find_redacted,
    redacted_paths,
    shown_order,
    visible_path,
)


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


def _glob_target(path: str, folder: str, redacted: RedactedPaths) -> str | None:
    """What a glob is matched against: the path below `folder` as the tools show it. A path
    shown redacted is matched by its shown text only (never by the token in its raw name, which
    glob probes would spell out); None when that text does not keep the folder in front."""
    prefix = folder + "/" if folder else ""
    if not redacted.hides(path):
        return path[len(prefix) :]
    shown = visible_path(path)
    if shown == path or not shown.startswith(prefix):
        return None
    return shown[len(prefix) :]


def _glob_from_manifest(
    ctx: ToolContext,
    manifest: Manifest,
    spec: pathspec.PathSpec,
    root: str,
    folder: str,
    rows: list[tuple[str, dict[str, Any]]],
    redacted: RedactedPaths,
) -> int:
    """Matches of `spec` below `folder` ("." for the root) from the snapshot's manifest: only the
    rows shown touch the disk. The count of every match."""
    folder = "" if folder == "." else folder.replace(os.sep, "/")
    total = 0
    for entry in manifest.under(folder):
        target = _glob_target(entry.path, folder, redacted)
        if target is None or not spec.match_file(target):
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
    folder = os.path.relpath(absolute, root).replace(os.sep, "/")
    folder = "" if folder == "." else folder
    for path_from_root, entry in walk(Path(root), absolute, ctx.settings, truncated):
        one = find_redacted([path_from_root])
        target = _glob_target(path_from_root, folder, one)
        if target is not None and spec.match_file(target):
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
    the folder whose path matches, at any depth (.gitignore-style). For text inside files, use search.

    Args:
        repo: the repo's name
        path: folder to list, relative to the repo root; omit for the root
        glob: file name pattern matched at any depth, e.g. "*.go", "test_*.py", "**/migrations/*.sql"
    """
    settings = ctx.settings
    snapshot = ctx.snapshot(repo)
    name = snapshot.repo.name
    absolute, relative = resolve_path(snapshot, "" if path.strip() in ("/", "./") else path, settings)
    if not absolute.exists():
        raise not_found(snapshot, relative, settings)
    if not absolute.is_dir():
        raise ToolError(f"{relative!r} is a file, not a folder; call read_file to read it")
    where = f"{name}:{shown_name(relative) or '.'}/"
    found = (
        _matching(ctx, snapshot, absolute, glob, where) if glob else _folder(ctx, snapshot, absolute, where)
    )
    lines = [found.title, *(row for row, _ in found.rows), *_notices(found, snapshot, relative, glob)]
    data = {
        "repo": name,
        "path": relative,
        "glob": glob,
        "total": found.total,
        "entries": [d for _, d in found.rows],
    }
    return finish(ctx, "\n".join(lines), data)


@dataclass
class _Listing:
    """What one list_files call found: its title, the rows shown (at most list_max_entries),
    how many there were, and how many were left out as never listed."""

    title: str = ""
    rows: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    total: int = 0
    hidden: int = 0


def _folder(ctx: ToolContext, snapshot: Snapshot, absolute: Path, where: str) -> _Listing:
    """A folder's own entries, folders first, without .git and secret files."""
    root = os.path.realpath(snapshot.root)
    found = _Listing()
    folder = os.path.relpath(absolute, root).replace(os.sep, "/")
    prefix = "" if folder == "." else folder + "/"
    shown = shown_order(snapshot.root)  # by raw name, a redacted name's place would tell its start
    with os.scandir(absolute) as scan:
        entries = sorted(scan, key=lambda e: (not e.is_dir(follow_symlinks=False), shown(prefix + e.name)))
    for entry in entries:
        line = None if hidden_name(entry.name, ctx.settings) else _entry_line(entry, entry.name, root, ctx)
        if line is None:
            found.hidden += 1
            continue
        found.total += 1
        if len(found.rows) < ctx.settings.list_max_entries:
            found.rows.append(line)
    found.title = f"{where} {found.total} entries"
    return found


def _matching(ctx: ToolContext, snapshot: Snapshot, absolute: Path, glob: str, where: str) -> _Listing:
    """Every file below a folder whose path matches the glob, from the manifest when the
    snapshot has one."""
    settings = ctx.settings
    spec = _glob_spec(glob, settings)
    root = os.path.realpath(snapshot.root)
    found = _Listing()
    truncated: list[bool] = []
    manifest = load_manifest(snapshot.root)
    if manifest is not None:
        redacted = redacted_paths(snapshot.root) or NONE
        found.total = _glob_from_manifest(
            ctx, manifest, spec, root, os.path.relpath(absolute, root), found.rows, redacted
        )
    else:  # a snapshot built before manifests: walk it
        found.total = _glob_by_walking(ctx, spec, root, absolute, found.rows, truncated)
    shown = shown_order(snapshot.root)
    found.rows.sort(key=lambda row: shown(row[1]["path"]))
    found.title = f"{where} files matching {glob!r}: {'at least ' if truncated else ''}{found.total}"
    if truncated:
        found.title += (
            f" (stopped after looking at {settings.list_walk_max_entries:,} entries; pass a deeper path)"
        )
    return found


def _glob_spec(glob: str, settings: Settings) -> pathspec.PathSpec:
    """The glob as .gitignore-style patterns, or a ToolError saying what a good one looks like."""
    if len(glob) > settings.pattern_max_chars:
        raise ToolError(f"the glob is longer than {settings.pattern_max_chars} characters; use a shorter one")
    try:
        return pathspec.GitIgnoreSpec.from_lines([glob])
    except Exception as exc:  # pathspec raises several types for a malformed pattern
        raise ToolError(
            f"invalid glob {glob!r} ({exc}); use a pattern like '*.py' or 'src/**/test_*.py'"
        ) from None


def _notices(found: _Listing, snapshot: Snapshot, relative: str, glob: str | None) -> list[str]:
    """What follows the rows: an empty result said so, what was cut, and what is never listed."""
    notices = []
    if not found.total:
        notices.append("(nothing here)" if not glob else "(no match; try a looser glob like '*name*')")
    if found.total > len(found.rows):
        notices.append(
            f"[showing {len(found.rows)} of {found.total}; pass a deeper path or a glob to narrow]"
        )
    if found.hidden:
        notices.append(f"[{found.hidden} entries not listed: .git or secret files, which are never readable]")
    if not relative and not glob and snapshot.meta.withheld:
        notices.append(
            f"[{snapshot.meta.withheld} secret or credentials file(s) in this repo are withheld: "
            "never listed, searched or read]"
        )
    return notices
