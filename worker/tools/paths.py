"""The one gate between a path the model sends and a file on disk.

Every tool that takes a path calls `resolve_path`. It refuses, before touching the disk, what
can never be allowed (NUL bytes, absolute paths, `..`, `.git`, secret file names, over-long
paths), then resolves symlinks and refuses anything that lands outside the snapshot — which
also covers a link into a sibling repo's snapshot — or on a `.git` or secret file.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from config.settings import Settings
from worker.repos.manifest import load_manifest
from worker.repos.snapshot import Snapshot
from worker.repos.visible import hidden_name, is_git_dir, secret_glob, secret_path, unshown
from worker.tools.context import ToolError
from worker.tools.visible_paths import find_redacted, redacted_paths, redacts, visible_path

_DRIVE = re.compile(r"^[A-Za-z]:")
_NAME_MAX_BYTES = 255  # NAME_MAX of Linux file systems
_PATH_MAX_BYTES = 3072  # well under PATH_MAX (4096) with the snapshot's own path in front
_SEPARATORS = re.compile(r"[/\\]")  # a backslash is a separator too: "..\\x" must not pass
_CLOSE_CANDIDATES = 2000  # names of one folder a missing name is compared with (difflib is O(n))


def _check_parts(parts: list[str], shown: str, settings: Settings) -> None:
    for part in parts:
        if part == "..":
            raise ToolError(
                f"{shown!r}: '..' is not allowed; paths are relative to the repo root (e.g. 'src/app.py') "
                "— use list_files to browse"
            )
        if is_git_dir(part):
            raise ToolError(f"{shown!r}: the .git folder is not readable; read the repo's files instead")
        glob = secret_glob(part, settings)
        if glob is not None:
            raise ToolError(f"{shown!r} is not readable: matches secret file pattern {glob!r}")
    glob = secret_path("/".join(parts), settings)
    if glob is not None:
        raise ToolError(f"{shown!r} is not readable: matches secret file pattern {glob!r}")


def resolve_path(snapshot: Snapshot, user_path: str, settings: Settings) -> tuple[Path, str]:
    """(absolute path on disk, normalised repo-relative path) for a path the model sent.

    The relative path is the one asked for, normalised ("./src//a.py" -> "src/a.py", the root
    is ""), so citations use the name the model saw even when it is an in-repo symlink; a name
    as shown_name showed it finds the file it names. Raises ToolError saying what to do instead.
    """
    absolute, relative = _resolve_path(snapshot, user_path, settings)
    real = unshown(user_path)
    if real != user_path and not os.path.lexists(absolute):
        behind, _ = _resolve_path(snapshot, real, settings)
        if os.path.lexists(behind):
            return behind, relative
    return absolute, relative


def _resolve_path(snapshot: Snapshot, user_path: str, settings: Settings) -> tuple[Path, str]:
    relative = check_relative_path(user_path, settings)
    parts = relative.split("/") if relative else []
    root = os.path.realpath(snapshot.root)
    target = os.path.realpath(os.path.join(root, *parts)) if parts else root
    if target != root and not target.startswith(root + os.sep):
        raise ToolError(f"{relative!r} is a link that leads outside the repo; it is not readable")
    resolved = os.path.relpath(target, root)
    if resolved != ".":
        # The link's target must pass the same checks as a name asked for directly.
        _check_parts(resolved.split(os.sep), relative, settings)
    return Path(target), relative


def check_relative_path(user_path: str, settings: Settings) -> str:
    """The normalised repo-relative path ("" for the root) of a path the model sent, checked
    without touching the disk: no NUL, not absolute, no `..`, no `.git`, no secret file name, not
    too long. The history tools use it for paths of any commit; `resolve_path` then checks the
    snapshot."""
    if "\x00" in user_path:
        raise ToolError("the path contains a NUL byte; give a plain relative path like 'src/app.py'")
    if len(user_path) > settings.path_max_chars:
        raise ToolError(f"the path is longer than {settings.path_max_chars} characters; give a shorter one")
    raw = user_path.strip()
    if raw.startswith(("/", "\\")) or _DRIVE.match(raw):
        raise ToolError(
            f"{raw!r} is an absolute path; paths are relative to the repo root, e.g. 'src/app.py' "
            "— use list_files to see the root"
        )
    parts = [part for part in _SEPARATORS.split(raw) if part not in ("", ".")]
    _check_parts(parts, raw, settings)
    try:
        encoded = [os.fsencode(part) for part in parts]
    except UnicodeEncodeError:
        raise ToolError("the path is not valid text (a lone surrogate); give a plain relative path") from None
    if any(len(part) > _NAME_MAX_BYTES for part in encoded) or sum(map(len, encoded)) > _PATH_MAX_BYTES:
        # The file system could not hold such a name; asking it would fail with ENAMETOOLONG.
        raise ToolError(
            f"{raw[:80]!r}…: no file has a name that long (at most {_NAME_MAX_BYTES} bytes per part); "
            "use list_files to browse"
        )
    relative = "/".join(parts)
    return visible_path(relative) if redacts(relative) else relative


def walk(
    root: Path, start: Path, settings: Settings, truncated: list[bool] | None = None
) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """(path relative to `root`, entry) of every file and link under `start`, sorted, without
    following symlinks and without `.git` or secret files; at most list_walk_max_entries are
    looked at (then True is appended to `truncated`)."""
    budget = settings.list_walk_max_entries
    stack = [start]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError:
            continue
        subfolders = []
        for entry in entries:
            budget -= 1
            if budget < 0:
                if truncated is not None:
                    truncated.append(True)
                return
            if hidden_name(entry.name, settings):
                continue
            if entry.is_dir(follow_symlinks=False):
                subfolders.append(Path(entry.path))
            else:
                yield os.path.relpath(entry.path, root).replace(os.sep, "/"), entry
        stack.extend(reversed(subfolders))


def not_found(snapshot: Snapshot, relative: str, settings: Settings) -> ToolError:
    """'x does not exist' with the closest real paths, so the model can correct itself: files of
    the same name anywhere, then names close to it in the same folder. Looked up in the
    snapshot's manifest (a walk only for a snapshot built without one)."""
    near = suggestions(snapshot, relative, settings)
    hint = f" Did you mean: {', '.join(repr(p) for p in near[:4])}?" if near else ""
    return ToolError(
        f"{relative!r} does not exist in repo {snapshot.repo.name!r}.{hint} "
        "Use list_files to browse or search to find the file."
    )


def suggestions(snapshot: Snapshot, relative: str, settings: Settings) -> list[str]:
    """Paths close to `relative`, never one the tools show redacted: its raw name would make the
    closeness score an oracle for the secret in it, and it cannot be named in a path anyway."""
    folder, _, name = relative.rpartition("/")
    manifest = load_manifest(snapshot.root)
    if manifest is None:
        root = Path(os.path.realpath(snapshot.root))
        known = [path for path, _ in walk(root, root, settings)]
        near = [path for path in known if path.rsplit("/", 1)[-1] == name][:3]
        candidates = known
    else:
        near = manifest.named(name)[:3]
        candidates = manifest.in_folder(folder, _CLOSE_CANDIDATES) + near
    redacted = redacted_paths(snapshot.root) if manifest is not None else None
    if redacted is None:
        redacted = find_redacted(candidates)
    if redacted.shown:
        near = [p for p in near if not redacted.hides(p)]
        candidates = [p for p in candidates if not redacted.hides(p)]
    near += [p for p in difflib.get_close_matches(relative, candidates, n=3, cutoff=0.6) if p not in near]
    return near


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KB", "MB", "GB"):
        value /= 1024
        if value < 1024 or unit == "GB":
            return f"{value:.1f} {unit}"
    return f"{size} B"  # unreachable; keeps mypy's return check simple
