"""What a search knows of its matches, to rank them (worker/tools/search_ranking.py).

- Definitions: the symbol index says where each name is defined. The host's name table
  (worker/repos/symbols_index/name_table.py) says in one query per name which repos define it
  (any case); only those repos' indexes, and the repos the table does not list, are opened, and
  only repos with matches. A line is a definition when a name written in the pattern is defined
  on it. Bounded by the search's deadline: past it, the lines found so far are all there is.
- Path matches: the pattern run over each matched file's path as shown, with RE2 (linear time,
  as every pattern run in this process is; worker/repos/blob_process.py). A pattern RE2 reads
  otherwise than ripgrep (or refuses) only ranks differently: nothing is shown or hidden by it.
  The path as shown, never the raw one: a redacted name's rank would tell a guess of its token.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

import re2

from worker.repos.blobstore import BlobStore
from worker.repos.snapshot import Snapshot
from worker.repos.symbols import index_path, open_index
from worker.repos.symbols_index.name_table import NameTable, snapshot_key
from worker.tools.context import ToolContext

Site = tuple[str, str, int]  # repo, path, line


def definition_sites(
    ctx: ToolContext, repos: list[str], names: list[str], ignore_case: bool, deadline: float
) -> set[Site]:
    """Where, in `repos`, the symbol index says one of `names` is defined (exactly, or in any
    case with `ignore_case`)."""
    sites: set[Site] = set()
    snapshots = [ctx.snapshots[repo] for repo in repos if repo in ctx.snapshots]
    if not names or not snapshots or time.monotonic() >= deadline:
        return sites
    for snapshot in _defining(ctx, snapshots, names, deadline):
        if time.monotonic() >= deadline:
            break
        try:
            index = open_index(snapshot.root, ctx.settings, deadline)
        except (OSError, sqlite3.Error):
            continue  # no index (yet): this repo's lines rank as any other
        try:
            for name in names:
                for found in index.definitions(name, nocase=ignore_case):
                    sites.add((snapshot.repo.name, found.path, found.line))
        except sqlite3.Error:
            continue  # the deadline stopped the query, or the index is unreadable
        finally:
            index.close()
    return sites


def _defining(
    ctx: ToolContext, snapshots: list[Snapshot], names: list[str], deadline: float
) -> list[Snapshot]:
    """The snapshots the name table says define one of `names`, and those it does not list."""
    try:
        table = NameTable(BlobStore(ctx.settings.data_dir.resolve()).db_path, deadline)
    except (OSError, sqlite3.Error):
        return snapshots
    try:
        keys = {snapshot_key(index_path(s.root)): s.repo.name for s in snapshots}
        listed = {keys[key]: row.id for key, row in table.listed(list(keys)).items()}
        by_id = {id_: repo for repo, id_ in listed.items()}
        holders: set[str] = set()
        for name in names if by_id else []:
            holders.update(by_id[i] for i in table.holders(list(by_id), name))
    except sqlite3.Error:
        return snapshots
    finally:
        table.close()
    return [s for s in snapshots if s.repo.name in holders or s.repo.name not in listed]


def path_matcher(pattern: str, ignore_case: bool) -> Callable[[str], bool]:
    """Whether a path (as shown) matches the pattern; never, for a pattern RE2 cannot read."""
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    try:
        compiled = re2.compile(pattern, options=options)
    except re2.error:
        return lambda _path: False
    return lambda path: compiled.search(path) is not None
