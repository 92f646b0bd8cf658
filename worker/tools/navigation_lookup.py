"""Which repos a navigation call must open, its time limit, and what a miss says.

The host's name table (worker/repos/symbols_index/name_table.py) says, in one query for every
repo in scope, which repos define a name (in any case): only those are opened. A name defined
nowhere is a miss without opening any index, and its "did you mean" is one more query. A repo
the table does not list (an index made before it, or whose listing failed) is read from its own
index, as before.

Like search, a call has a time limit (`navigation_timeout_seconds`, or the question's deadline
when sooner): repos are looked in one by one until it passes, a query still running then is
stopped, and the answer says after how many of how many repos the time ran out — never "not
found" for what was not looked at.
"""

from __future__ import annotations

import difflib
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from worker.repos.blobstore import BlobStore
from worker.repos.snapshot import Snapshot
from worker.repos.symbol_grammars import GRAMMARS
from worker.repos.symbols import SymbolIndex, index_path, open_index
from worker.repos.symbols_index.name_table import Listed, NameTable, snapshot_key
from worker.repos.visible import shown_name
from worker.tools.context import ToolContext, ToolError

_NAMES = sorted({g.name for g in GRAMMARS.values()} - {"C/C++"}, key=str.lower)
LANGUAGES = ", ".join(_NAMES[:-1]) + " and " + _NAMES[-1]


class OutOfTime(Exception):
    """The call's time limit passed before every repo was looked in."""


@dataclass
class Lookup:
    """One navigation call over its repos: which to open, and how far it got in its time."""

    snapshots: list[Snapshot]  # in scope, in order
    deadline: float  # time.monotonic()
    time_limit: float  # seconds this call was allowed
    table: NameTable | None = None
    listed: dict[str, Listed] = field(default_factory=dict)  # repo name -> its row in the table
    holders: set[str] = field(default_factory=set)  # listed repos that define the name
    looked: int = 0  # repos looked in (the table answers for every listed repo at once)
    timed_out: bool = False

    def to_open(self) -> list[Snapshot]:
        """The repos whose index must be read: those that define the name, and the unlisted."""
        return [s for s in self.snapshots if s.repo.name in self.holders or s.repo.name not in self.listed]

    def check_time(self) -> None:
        if time.monotonic() >= self.deadline:
            self.timed_out = True
            raise OutOfTime

    @contextmanager
    def index(self, ctx: ToolContext, snapshot: Snapshot) -> Iterator[SymbolIndex]:
        """The repo's index, its queries bounded by the deadline; counted as looked in once done."""
        self.check_time()
        index = _open(ctx, snapshot, self.deadline)
        try:
            yield index
        except sqlite3.OperationalError:
            if time.monotonic() < self.deadline:
                raise
            self.timed_out = True
            raise OutOfTime from None
        finally:
            index.close()
        self.looked += 1

    def ran_out(self) -> str:
        return (
            f"ran out of time after {self.looked} of {len(self.snapshots)} repos "
            f"(time limit {self.time_limit:.3g} s); the rest were not looked in"
        )

    def close(self) -> None:
        if self.table is not None:
            self.table.close()


def start(ctx: ToolContext, snapshots: list[Snapshot], name: str) -> Lookup:
    """A lookup of `name` over `snapshots`: the name table asked which define it."""
    started = time.monotonic()
    deadline = started + ctx.settings.navigation_timeout_seconds
    if ctx.deadline is not None:  # a navigation never outlives the question it serves
        deadline = min(deadline, ctx.deadline)
    lookup = Lookup(snapshots, deadline, max(deadline - started, 0.0))
    lookup.check_time()
    try:
        lookup.table = NameTable(BlobStore(ctx.settings.data_dir.resolve()).db_path, deadline)
    except (OSError, sqlite3.Error):
        return lookup  # no table: every repo is read from its own index
    try:
        keys = {snapshot_key(index_path(s.root)): s.repo.name for s in snapshots}
        listed = lookup.table.listed(list(keys))
        lookup.listed = {keys[key]: row for key, row in listed.items()}
        by_id = {row.id: repo for repo, row in lookup.listed.items()}
        lookup.holders = {by_id[i] for i in lookup.table.holders(list(by_id), name)} if by_id else set()
    except sqlite3.OperationalError:
        if time.monotonic() < deadline:
            lookup.listed, lookup.holders = {}, set()  # a broken table: read every index instead
            return lookup
        lookup.close()
        raise OutOfTime from None
    lookup.looked = len(lookup.listed) - len(lookup.holders)
    return lookup


def _open(ctx: ToolContext, snapshot: Snapshot, deadline: float) -> SymbolIndex:
    try:
        return open_index(snapshot.root, ctx.settings, deadline)
    except (OSError, sqlite3.Error, ToolError) as exc:
        raise ToolError(
            f"the code index of repo {snapshot.repo.name!r} is unavailable ({type(exc).__name__}); "
            "use search instead, e.g. pattern 'def NAME|class NAME|func NAME'"
        ) from None


@dataclass
class _MissFacts:
    candidates: set[str] = field(default_factory=set)
    partial: bool = False
    pending: int = 0
    skipped: list[str] = field(default_factory=list)
    complete: bool = True  # False: the time ran out while looking for similar names


def _miss_facts(ctx: ToolContext, lookup: Lookup, name: str) -> _MissFacts:
    facts = _MissFacts()
    listed = list(lookup.listed.values())
    for row in listed:
        facts.partial = facts.partial or row.partial
        facts.pending += row.pending
        facts.skipped += [f"{shown_name(path)} ({reason})" for path, reason in row.sample]
    try:
        if lookup.table is not None and listed:
            facts.candidates.update(lookup.table.names_like([row.id for row in listed], name))
        for snapshot in (s for s in lookup.snapshots if s.repo.name not in lookup.listed):
            with lookup.index(ctx, snapshot) as index:
                facts.candidates.update(index.names_like(name))
                info = index.info()
                facts.partial = facts.partial or info.partial
                facts.pending += info.pending
                facts.skipped += [f"{shown_name(f.path)} ({f.reason})" for f in index.not_indexed(limit=3)]
    except (OutOfTime, sqlite3.OperationalError):
        facts.complete = False
    return facts


def not_found(ctx: ToolContext, lookup: Lookup, symbol: str, name: str) -> ToolError:
    """The answer to a name defined in no repo looked in: close names, and where else to look."""
    facts = _miss_facts(ctx, lookup, name)
    candidates = facts.candidates
    near = difflib.get_close_matches(name, sorted(candidates), n=5, cutoff=0.6)
    near += sorted((c for c in candidates if name.lower() in c.lower() and c not in near), key=len)
    snapshots = lookup.snapshots
    where = f"repo {snapshots[0].repo.name}" if len(snapshots) == 1 else f"{len(snapshots)} repos"
    hint = f" Did you mean: {', '.join(near[:6])}?" if near else ""
    if not facts.complete:
        hint += " (the time ran out while looking for similar names)"
    extra = " (the index of a very large repo covers only its first files)" if facts.partial else ""
    if facts.pending:
        extra += (
            f" (the index is still being built: {facts.pending:,} files not parsed yet; search sees them)"
        )
    skipped = facts.skipped
    if skipped:
        extra += f" (not indexed: {', '.join(skipped[:3])}{' and more' if len(skipped) > 3 else ''})"
    return ToolError(
        f"no definition of {symbol!r} in {where}{extra}.{hint} The index covers {LANGUAGES} code "
        "defined in the repo; for other languages, text, or names from libraries, use search "
        f"with a pattern like '\\b{name}\\b'"
    )
