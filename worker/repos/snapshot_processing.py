"""Processing what a snapshot needs and the host's store lacks, in the bounded blob pool.

A snapshot build (worker/repos/assemble.py) and the deferred parse of its code
(worker/repos/deferred_index.py) hand the pool (worker/repos/blob_pool.py) the blobs the store
(worker/repos/blobstore.py) has not processed and the (blob, grammar) pairs it has not parsed;
`Processing` writes each outcome into the store as it comes, committing every few hundred rows
and checking the disk's reserve, and reports progress. What the previous build's record knew is
taken from it: a refresh after a two-file commit processes two blobs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.settings import Settings
from worker.repos.blob_pool import PoolLimits, Task, run_tasks
from worker.repos.blobstore import BlobInfo, BlobStore
from worker.repos.build_record import BuildRecord
from worker.repos.disk import check_room, free_bytes
from worker.repos.placeholders import TEXT
from worker.repos.snapshot_plan import Plan, parse_pairs
from worker.repos.symbol_grammars import GRAMMARS

Progress = Callable[[str, float | None], None]
_PER_FILE_BYTES = 512  # directory entry, inode and index row: what a file costs beyond its content
_COMMIT_EVERY = 300  # store rows written per transaction while processing


@dataclass
class Processing:
    """Writes the pool's outcomes into the store, and reports progress."""

    store: BlobStore
    db: Any
    sizes: dict[str, int]
    infos: dict[str, BlobInfo]
    report: Progress
    total: int
    settings: Settings
    done: int = 0
    pending: int = 0
    last_report: float = 0.0

    def __call__(self, message: tuple[Any, ...]) -> None:
        outcome, sha = message[0], message[1]
        if outcome == "stored":
            _, _, kind, reason, lines, _ = message
            self.store.record_stored(self.db, sha, kind, reason, lines)
            self.infos[sha] = BlobInfo(kind, reason, lines)
            return
        if outcome == "parsed":
            self.store.record_parsed(self.db, sha, message[2])
        elif outcome == "failed":
            stage, reason = message[2], message[3]
            if stage == "stored":
                self.store.withhold(self.db, sha, self.sizes.get(sha, 0), reason)
                self.infos[sha] = BlobInfo("withheld", reason, 0)
            else:
                self.store.record_unparsed(self.db, sha, GRAMMARS, f"failed: {reason}")
        self.done += 1
        self.pending += 1
        if self.pending >= _COMMIT_EVERY:
            self.db.execute("COMMIT")
            self.db.execute("BEGIN IMMEDIATE")
            self.pending = 0
            if free_bytes(self.store.root) < self.settings.disk_reserve_bytes:
                check_room(self.store.root, 0, self.settings.disk_reserve_bytes, "go on processing files")
        now = time.monotonic()
        if now - self.last_report >= 0.5:
            self.last_report = now
            self.report(
                f"processing files {self.done:,}/{self.total:,}", 0.85 + 0.13 * self.done / max(1, self.total)
            )


def process_missing(
    store: BlobStore,
    db: Any,
    git_dir: Path,
    plan: Plan,
    sizes: dict[str, int],
    record: BuildRecord | None,
    name: str,
    entries: int,
    report: Progress,
    settings: Settings,
    parse_later_over: int | None = None,
) -> tuple[dict[str, BlobInfo], dict[tuple[str, str], int], int]:
    """Process the blobs and parse the (blob, grammar) pairs the store lacks; what the store then
    says of every blob, and the unit of every pair. What the previous build's record knew is
    taken from it (its snapshot still links those objects, so the store still has them)."""
    reused = {s: BlobInfo(*record.infos[s]) for s in sizes if s in record.infos} if record else {}
    infos = {**reused, **store.known(db, [s for s in sizes if s not in reused])}
    missing = [sha for sha in sizes if sha not in infos]
    needed = sum(sizes[s] for s in missing) + _PER_FILE_BYTES * entries
    check_room(store.root, needed, settings.disk_reserve_bytes, f"make the snapshot of {name}")
    wanted = parse_pairs(plan, sizes, settings)
    known_units = {pair: record.units[pair] for pair in wanted if pair in record.units} if record else {}
    parsed = {**known_units, **store.units(db, wanted - set(known_units))}
    grammars: dict[str, set[str]] = {}
    for blob, grammar in wanted - set(parsed):
        grammars.setdefault(blob, set()).add(grammar)
    pending = sum(len(g) for g in grammars.values())
    if parse_later_over is not None and pending > parse_later_over:
        tasks = [Task("process", s) for s in missing]  # redact and store now, parse once it serves
    else:
        pending = 0
        tasks = [Task("process", s, tuple(sorted(grammars.pop(s, ())))) for s in missing]
        tasks += [Task("parse", s, tuple(sorted(g))) for s, g in grammars.items() if infos[s].kind == TEXT]
    if tasks:
        report(f"processing {len(missing):,} new files", 0.85)
        processing = Processing(store, db, sizes, infos, report, len(tasks), settings)
        # IMMEDIATE: take the write lock now (waiting for another build's commit if need be),
        # never upgrade from a read later, which WAL may refuse without waiting.
        db.execute("BEGIN IMMEDIATE")
        try:
            run_tasks(git_dir, store.objects, tasks, pool_limits(settings), processing)
        finally:
            db.execute("COMMIT")
        parsed.update(store.units(db, wanted - set(parsed)))
    return infos, parsed, pending


def pool_limits(settings: Settings) -> PoolLimits:
    return PoolLimits(
        workers=settings.blob_workers or os.cpu_count() or 1,
        timeout_seconds=settings.blob_timeout_seconds,
        memory_bytes=settings.blob_memory_bytes,
        parse_max_bytes=settings.symbols_max_file_bytes,
    )
