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
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from config.settings import Settings
from worker.repos.search_index.planner import fts_expression, plan
from worker.repos.search_index.store import (
    candidate_paths,
    connect_for_reading,
    indexed_snapshots,
    snapshot_key,
)
from worker.repos.snapshot import Snapshot

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
    candidates: dict[str, list[str]] = field(default_factory=dict)

    def skips(self, repo: str) -> bool:
        return self.narrowed and repo not in self.unindexed and repo not in self.candidates

    def restricts(self, repo: str) -> list[str] | None:
        return self.candidates.get(repo) if self.narrowed and repo not in self.unindexed else None


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
    result.candidates = {by_id[i]: [os.fsdecode(p) for p in paths] for i, paths in found.items()}
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
