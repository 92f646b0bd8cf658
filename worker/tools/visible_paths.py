"""Paths as the tools show them, and the paths whose raw names no probe may match.

Every tool result is redacted last (worker/tools/redact.py), so a file or folder whose name holds
a token is shown as `docs/[REDACTED:github-token].md`. Whatever the model (or an MCP client)
can filter paths with must see that shown name too, never the raw one: a glob, a path prefix or
a closeness score over raw names answers yes or no to a guess of the token's next character,
and bisection spells a 40-character name out in a few hundred calls. So:

- a path argument whose text redacts is replaced by its redacted text (`check_relative_path`):
  a right and a wrong guess of the token become the same string, which names nothing;
- a glob is matched against the shown (redacted) path of every entry whose path redacts: by
  `list_files`, and by `search`, which excludes such files from ripgrep's own glob matching (it
  sees raw names only) and searches those whose shown path matches in a run of their own;
- "did you mean" suggestions are shown paths, compared with the shown path asked for.

Which paths of a snapshot redact is decided when it is built and stored in its manifest
(worker/repos/shown_paths.py).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pathspec

from worker.repos.manifest import FILE, load_manifest, manifest_path
from worker.repos.secrets.redaction import get_redactor
from worker.repos.shown_paths import redacted_paths_of
from worker.repos.visible import shown_name


def visible_path(path: str) -> str:
    """A path as the tools show it: no control character, every secret in it redacted."""
    return get_redactor().redact(shown_name(path))


def redacts(path: str) -> bool:
    """Whether the tools never show this path's raw text (it holds a secret)."""
    shown = shown_name(path)
    return get_redactor().redact(shown) != shown


@dataclass(frozen=True)
class RedactedPaths:
    """The paths of one snapshot whose shown text is redacted."""

    shown: dict[str, str]  # raw path of a file, link or folder -> its shown (redacted) path
    outermost: tuple[str, ...]  # those with no redacted folder above them, sorted

    def hides(self, path: str) -> bool:
        """Whether the path, or a folder above it, is redacted when shown."""
        parts = path.split("/")
        return any("/".join(parts[: depth + 1]) in self.shown for depth in range(len(parts)))


NONE = RedactedPaths({}, ())
_lock = threading.Lock()
_known: OrderedDict[tuple[str, int], RedactedPaths] = OrderedDict()
_KEEP = 4096  # snapshots remembered: an org-wide search orders the paths of every repo in scope


def shown_order(root: Path) -> Callable[[str], str]:
    """A sort key for the snapshot's paths: the path as shown. Sorted by raw name, a redacted
    name's place among its neighbours would tell the first characters of the token in it."""
    redacted = redacted_paths(root) or NONE
    if not redacted.shown:
        return lambda path: path
    return lambda path: visible_path(path) if redacted.hides(path) else path


def redacted_paths(root: Path) -> RedactedPaths | None:
    """The redacted paths of the snapshot at `root`, as its manifest stores them (found here
    for a manifest written before it did); None without a manifest."""
    try:
        stamp = manifest_path(root).stat().st_mtime_ns
    except OSError:
        return None
    key = (str(root), stamp)
    with _lock:
        known = _known.get(key)
    if known is not None:
        return known
    manifest = load_manifest(root)
    if manifest is None:
        return None
    found = _paths(
        manifest.redacted
        if manifest.redacted is not None
        else redacted_paths_of(e.path for e in manifest.entries)
    )
    with _lock:
        _known[key] = found
        while len(_known) > _KEEP:
            _known.popitem(last=False)
    return found


def find_redacted(paths: Iterable[str]) -> RedactedPaths:
    """The redacted ones among `paths` and their folders."""
    return _paths(redacted_paths_of(paths))


def _paths(redacted: dict[str, str]) -> RedactedPaths:
    if not redacted:
        return NONE
    return RedactedPaths(redacted, tuple(p for p in sorted(redacted) if not _below_any(p, redacted)))


def shown_glob_matches(root: Path, glob: str, max_bytes: int) -> list[str]:
    """The raw paths of the snapshot's searchable files shown redacted whose shown path matches
    `glob` (gitignore-style, as `list_files` matches; a leading "!" inverts, as in ripgrep):
    what `search` searches of them when given that glob. Files its ignore files hide or over
    `max_bytes` are left out, as ripgrep leaves them out of every search."""
    redacted = redacted_paths(root)
    manifest = load_manifest(root)
    if redacted is None or manifest is None or not redacted.shown:
        return []
    negated = glob.startswith("!")
    try:
        spec = pathspec.GitIgnoreSpec.from_lines([glob[1:] if negated else glob])
    except Exception:  # ripgrep judged the glob already; pathspec has many error types
        return []
    ignored = set(manifest.ignored or ())
    found = []
    for entry in manifest.entries:
        if (
            entry.kind != FILE
            or entry.size > max_bytes
            or entry.path in ignored
            or not redacted.hides(entry.path)
        ):
            continue
        shown = visible_path(entry.path)
        if shown != entry.path and spec.match_file(shown) != negated:
            found.append(entry.path)
    return found


def _below_any(path: str, folders: dict[str, str]) -> bool:
    parts = path.split("/")
    return any("/".join(parts[:depth]) in folders for depth in range(1, len(parts)))
