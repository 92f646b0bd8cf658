"""Parsing a served snapshot's code for the symbol index, after the snapshot serves.

A first sync redacts and stores every blob before the snapshot serves (nothing is ever shown
unredacted), but parsing every file for `find_definition` and `find_references` costs as much
again: with more than `PARSE_LATER_OVER` files to parse, the build leaves them out, the snapshot
serves (read, search, history: everything but the code index), and `finish_index` parses them
right after, still inside the same sync and under the repo's refresh lock. Until then the index
says how many files are pending and the navigation tools say that the index is still being
built. A sync that finds the current snapshot's index pending (the process died half-way)
finishes it.
"""

from __future__ import annotations

import logging
from pathlib import Path

from config.settings import Settings
from worker.repos.assemble import write_snapshot_index
from worker.repos.blob_pool import Task, run_tasks
from worker.repos.blobstore import BlobInfo, BlobStore
from worker.repos.build_record import load_record, record_key, record_path, save_record
from worker.repos.placeholders import TEXT
from worker.repos.snapshot import SNAPSHOT_FORMAT
from worker.repos.snapshot_plan import Plan, parse_pairs, stored_sizes
from worker.repos.snapshot_processing import Processing, Progress, pool_limits
from worker.repos.tree_listing import GITLINK, SYMLINK

log = logging.getLogger(__name__)

PARSE_LATER_OVER = 500  # files to parse above which a snapshot serves before its code is indexed


def finish_index(settings: Settings, git_dir: Path, index: Path, report: Progress) -> int:
    """Parse what the snapshot whose index is at `index` still lacks, then write its index whole;
    the number of (file, grammar) pairs parsed. Its build record says what the snapshot holds."""
    store = BlobStore(settings.data_dir.resolve())
    record = load_record(record_path(index), record_key(settings, store.generation, SNAPSHOT_FORMAT))
    if record is None or record.indexable is None:
        log.warning("cannot finish the symbol index %s: its build record is missing", index.name)
        return 0
    plan = Plan(
        files=[
            e
            for e in record.entries
            if e.mode not in (SYMLINK, GITLINK)
            and e.path not in record.by_name
            and e.path not in record.withheld
        ]
    )
    sizes = stored_sizes(plan, settings)
    infos = {sha: BlobInfo(*info) for sha, info in record.infos.items()}
    wanted = parse_pairs(plan, sizes, settings)
    with store.in_use():
        db = store.connect()
        try:
            units = {**record.units, **store.units(db, wanted - set(record.units))}
            grammars: dict[str, set[str]] = {}
            for blob, grammar in wanted - set(units):
                if infos.get(blob, BlobInfo("", None, 0)).kind == TEXT:
                    grammars.setdefault(blob, set()).add(grammar)
            tasks = [Task("parse", sha, tuple(sorted(g))) for sha, g in grammars.items()]
            if tasks:
                report(f"indexing the code of {len(tasks):,} files", 0.99)
                db.execute("BEGIN IMMEDIATE")
                try:
                    run_tasks(git_dir, store.objects, tasks, pool_limits(settings), Processing(
                        store, db, sizes, infos, report, len(tasks), settings))  # fmt: skip
                finally:
                    db.execute("COMMIT")
                units.update(store.units(db, wanted - set(units)))
            if index.exists():  # the snapshot still serves (or may: a question leases it)
                write_snapshot_index(
                    record.indexable, plan, set(record.failed), units, index, store, settings
                )
        finally:
            db.close()
    record.units = {pair: unit for pair, unit in units.items() if pair in wanted}
    save_record(record_path(index), record)
    return sum(len(g) for g in grammars.values())
