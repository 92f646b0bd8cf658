"""Which files of each snapshot a search must read, from the search index (docs/search-index.md).

The pattern is planned into trigram look-ups (worker/repos/search_index/planner.py); the files
whose content holds them are the candidates. ripgrep still decides everything else, with the very
command it runs without the index, plus one `--ignore-file` that ignores every file but the
candidates. An ignore file is the weakest of ripgrep's filters: the snapshot's own ignore files,
the model's glob and our exclusions all keep their say, so the index can only leave out files
that could not have matched, and the output is what the plain walk prints. A snapshot with no
candidate is not searched at all.
"""

from __future__ import annotations

import os
import re
import sqlite3
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from config.settings import Settings
from worker.repos.manifest import FILE, load_manifest, manifest_path
from worker.repos.search_index.planner import fts_expression, plan
from worker.repos.search_index.store import (
    candidate_paths,
    connect_for_reading,
    indexed_snapshots,
    snapshot_key,
)
from worker.repos.snapshot import Snapshot
from worker.repos.visible import secret_path
from worker.tools.search_scope import path_globs

UNNARROWED_NOTE = (
    "[the search index cannot narrow this pattern (it has no literal text of 3+ characters that "
    "every match must contain, or syntax the index does not plan), so every file was read; a "
    "pattern with a longer literal part is faster]"
)
_GITIGNORE_SPECIAL = re.compile(r"([\\*?\[\]{}!#])")
_PLAIN_NAME = re.compile(r"[^\x00-\x1f\x7f\ud800-\udfff]*")


@dataclass
class IndexPlan:
    """What the index says of one search. `candidates[repo]`: the only files of that snapshot that
    can match; a repo absent from it (and from `unindexed`) cannot match at all."""

    narrowed: bool = False  # the pattern was planned into look-ups
    used: bool = False  # some snapshot in scope has an index
    unindexed: set[str] = field(default_factory=set)  # repos searched whole
    candidates: dict[str, dict[str, int]] = field(default_factory=dict)  # repo -> path -> size

    def skips(self, repo: str) -> bool:
        return self.narrowed and repo not in self.unindexed and repo not in self.candidates

    def restricts(self, repo: str) -> list[str] | None:
        found = self.candidates.get(repo) if self.narrowed and repo not in self.unindexed else None
        return None if found is None else list(found)


def index_plan(
    settings: Settings, snapshots: list[Snapshot], pattern: str, ignore_case: bool, deadline: float
) -> IndexPlan:
    """What the index says; a look-up still running at `deadline` is given up (every file is then
    read, within what is left of the search's time)."""
    names = {s.repo.name for s in snapshots}
    db = connect_for_reading(settings)
    if db is None:
        return IndexPlan(unindexed=names)
    db.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        keys = {s.repo.name: snapshot_key(s.root) for s in snapshots}
        ids = indexed_snapshots(db, [k for k in keys.values() if k])
        by_id = {ids[key]: name for name, key in keys.items() if key in ids}
        result = IndexPlan(used=bool(by_id), unindexed=names - set(by_id.values()))
        query = plan(pattern, ignore_case)
        if query is None or not by_id:
            return result
        found = candidate_paths(db, list(by_id), fts_expression(query))
    except sqlite3.Error:  # a broken or busy index: search reads every file, as without one
        return IndexPlan(unindexed=names)
    finally:
        db.close()
    result.narrowed = True
    result.candidates = {by_id[i]: {os.fsdecode(p): size for p, size in files} for i, files in found.items()}
    return result


@contextmanager
def candidates_only(paths: list[str] | None) -> Iterator[list[str]]:
    """ripgrep arguments that keep it to `paths` (none when they cannot all be spelled)."""
    if paths is None or not all(_spellable(p) for p in paths):
        yield []
        return
    lines = ["*", "!*/", *("!/" + _GITIGNORE_SPECIAL.sub(r"\\\1", p) for p in paths)]
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".ignore") as rules:
        rules.write("\n".join(lines) + "\n")
        rules.flush()
        yield [f"--ignore-file={rules.name}"]


def _spellable(path: str) -> bool:
    """A path a gitignore line can name exactly: no control character, no undecodable byte, no
    space at either end (gitignore trims trailing spaces)."""
    return _PLAIN_NAME.fullmatch(path) is not None and path == path.strip()


@contextmanager
def empty_folder() -> Iterator[Path]:
    """Where ripgrep checks a pattern when no snapshot had a candidate: a search that would have
    failed on a bad pattern still fails with ripgrep's own message."""
    with tempfile.TemporaryDirectory(prefix="codebot-search-") as folder:
        yield Path(folder)


# What ripgrep prints, instead of the lines, for a file given by path that holds a NUL and
# matches. Only a placeholder holds a NUL in a snapshot (worker/repos/placeholders.py: text
# never does, a placeholder starts with one), and the walk never prints a placeholder's lines.
PLACEHOLDER_NOTICE = re.compile(rb'.*: binary file matches \(found "\\0" byte around offset \d+\)')
_ARGV_BYTES = 512 << 10  # paths per rg, well under Linux's ARG_MAX (2 MiB with the environment)
_SCOPES_KEPT = 4096  # snapshots whose left-out files are remembered (an org's every repo)
_GLOB_SYNTAX = re.compile(r"[\[\]{}\\]|\*\*|^/|/$")  # what fnmatch reads otherwise than ripgrep


@dataclass
class CandidateBatch:
    """Candidate files of several snapshots, searched by one rg that is given them by path (run
    in `cwd`, their common folder): no process per repo and no walk of any tree."""

    cwd: Path
    paths: list[str] = field(default_factory=list)  # relative to cwd, as rg prints them
    owners: dict[bytes, tuple[str, str]] = field(default_factory=dict)  # printed -> (repo, path)

    def locate(self, printed: bytes) -> tuple[str, str]:
        return self.owners[printed]


@dataclass(frozen=True)
class _Scope:
    """What the plain walk of one snapshot leaves out by name, from its manifest
    (worker/tools/search_scope.py decides the same from the same lists)."""

    left_out: frozenset[str]  # hidden by its ignore files, or over the size limit in git
    by_size: bool  # files over the size limit on disk are left out (ripgrep's --max-filesize)
    unsure: frozenset[str]  # files an exclusion glob may leave out, or no rg argument can name


_scopes: OrderedDict[tuple[str, int, int, tuple[str, ...]], _Scope | None] = OrderedDict()
_scopes_lock = threading.Lock()


def candidate_batches(
    settings: Settings, snapshots: list[Snapshot], index: IndexPlan
) -> tuple[list[CandidateBatch], set[str]]:
    """The candidates of every snapshot that can be searched by path, in batches of one rg each,
    and the repos they cover (every other repo is searched by its own walk, as before).

    Given paths, ripgrep applies none of its filters, so a file is given only when the walk
    would have read it: not hidden by the snapshot's ignore files, not over the size limit, not
    a secret or `.git` name (a snapshot holding such a name is walked). A search with a glob is
    walked too: which files a glob keeps is for ripgrep to say."""
    if not index.narrowed or not _secret_names_checkable(settings):
        return [], set()
    chosen: dict[str, tuple[Path, list[str]]] = {}
    for snapshot in snapshots:
        name = snapshot.repo.name
        found = index.candidates.get(name) if name not in index.unindexed else None
        kept = None if found is None else _searched_by_path(settings, snapshot.root, found)
        if kept is not None:
            chosen[name] = (snapshot.root, kept)
    if not chosen:
        return [], set()
    cwd = Path(os.path.commonpath([str(root) for root, _ in chosen.values()]))
    batches = [CandidateBatch(cwd)]
    used = 0
    for name, (root, kept) in chosen.items():
        prefix = os.path.relpath(root, cwd)
        for path in kept:
            printed = path if prefix == "." else f"{prefix}/{path}"
            encoded = printed.encode()
            if used + len(encoded) > _ARGV_BYTES and batches[-1].paths:
                batches.append(CandidateBatch(cwd))
                used = 0
            batches[-1].paths.append(printed)
            batches[-1].owners[encoded] = (name, path)
            used += len(encoded) + 1 + 8  # the bytes, their NUL, their pointer
    return [b for b in batches if b.paths], set(chosen)


def _secret_names_checkable(settings: Settings) -> bool:
    """Every secret-file glob is one that `secret_path` (fnmatch, any part or the tail of a path)
    matches at least wherever ripgrep's --iglob does: no classes, braces, `**` or anchors."""
    return not any(_GLOB_SYNTAX.search(glob) for glob in settings.secret_file_globs)


def _searched_by_path(settings: Settings, root: Path, candidates: dict[str, int]) -> list[str] | None:
    """The candidates the plain walk would read, or None when that cannot be told by name."""
    limit = settings.search_max_file_bytes
    scope = _scope_of(settings, root)
    if scope is None or not scope.unsure.isdisjoint(candidates):
        return None
    return [
        path
        for path, size in candidates.items()
        if path not in scope.left_out and not (scope.by_size and size > limit)
    ]


def _never_searched(path: str, settings: Settings) -> bool:
    """A name search's exclusion globs could leave out (a snapshot never holds one as built)."""
    return any(part.lower() == ".git" for part in path.split("/")) or secret_path(path, settings) is not None


def _scope_of(settings: Settings, root: Path) -> _Scope | None:
    """The snapshot's left-out files, read once per process; None: its manifest lists no ignored
    files (ripgrep must then read the ignore files itself)."""
    limit = settings.search_max_file_bytes
    try:
        stamp = manifest_path(root).stat().st_mtime_ns
    except OSError:
        return None
    key = (str(root), stamp, limit, tuple(settings.secret_file_globs))
    with _scopes_lock:
        if key in _scopes:
            return _scopes[key]
    manifest = load_manifest(root)
    scope = None
    if manifest is not None and manifest.ignored is not None:
        large = [e.path for e in manifest.entries if e.kind == FILE and e.size > limit]
        by_size = path_globs(large) is None  # as search_scope: by name when few, else by size
        left_out = frozenset(manifest.ignored) | (frozenset() if by_size else frozenset(large))
        unsure = frozenset(
            e.path
            for e in manifest.entries
            if e.kind == FILE and (not _spellable(e.path) or _never_searched(e.path, settings))
        )
        scope = _Scope(left_out, by_size, unsure)
    with _scopes_lock:
        _scopes[key] = scope
        while len(_scopes) > _SCOPES_KEPT:
            _scopes.popitem(last=False)
    return scope
