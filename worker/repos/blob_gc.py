"""Blob GC: the store's objects that no snapshot links any more, and their rows, deleted.

An object's link count says how many snapshots use it (worker/repos/blobstore.py): at 1 only the
store links it. After a sync removes old snapshots (worker/repos/mirror_upkeep.py),
`collect_released` visits only the objects they linked; `collect` walks the whole store, when
what they linked is unknown, and removes a generation an upgrade left behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from worker.repos.blob_worker import object_file
from worker.repos.blobstore import BATCH, SCHEMA, BlobStore, chunks

log = logging.getLogger(__name__)


def collect(store: BlobStore) -> int:
    """Delete the objects no snapshot links to any more (and their rows); how many.

    Runs only when no build holds the store (else it skips: the next GC will do it), so an
    object a build is about to link is never deleted under it. Old generations go whole once
    none of their objects is linked."""
    if not store.root.is_dir():
        return 0
    with _unless_built(store) as free:
        if not free:
            return 0
        removed = 0
        for folder in sorted(store.root.glob("g*")):
            unused = _unlinked_objects(folder / "objects")
            if folder != store.folder and not _any_linked(folder / "objects"):
                shutil.rmtree(folder, ignore_errors=True)
                removed += len(unused)
                continue
            if unused:
                _forget(folder / "store.sqlite", unused)
                for path in unused.values():
                    path.unlink(missing_ok=True)
                removed += len(unused)
        return removed


def collect_released(store: BlobStore, released: Iterable[str]) -> int:
    """Delete those of `released` ("g<gen>/<sha>", from removed snapshots' blob lists) that
    no snapshot links any more; how many. Visits only them, never the whole store.

    When a build holds the store they wait in a pending file for the next call, so a busy
    store never leaks them."""
    pending_dir = store.root / "released"
    pending_dir.mkdir(parents=True, exist_ok=True)
    names = set(released)
    if names:
        tmp = pending_dir / f".{os.getpid()}-{time.monotonic_ns()}"
        tmp.write_text("\n".join(sorted(names)))
        os.rename(tmp, tmp.with_name(tmp.name[1:]))
    with _unless_built(store) as free:
        if not free:
            return 0
        lists = [p for p in pending_dir.iterdir() if not p.name.startswith(".")]
        by_generation: dict[str, set[str]] = {}
        for listed in lists:
            for name in listed.read_text().split():
                generation, _, sha = name.partition("/")
                by_generation.setdefault(generation, set()).add(sha)
        removed = sum(_collect_listed(store.root / g, shas) for g, shas in by_generation.items())
        for listed in lists:
            listed.unlink(missing_ok=True)
        return removed


@contextlib.contextmanager
def _unless_built(store: BlobStore) -> Iterator[bool]:
    """The store held exclusively, when no build holds it shared (True); else False at once:
    GC never waits for a build, the next GC does the work."""
    fd = os.open(store.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _collect_listed(folder: Path, shas: set[str]) -> int:
    if not folder.name.startswith("g") or not (folder / "store.sqlite").is_file():
        return 0  # a generation already removed whole
    objects = os.fspath(folder / "objects")
    unused: dict[str, Path] = {}
    for sha in shas:
        stored = object_file(objects, sha)
        with contextlib.suppress(OSError):
            if os.lstat(stored).st_nlink <= 1:
                unused[sha] = Path(stored)
    if unused:
        _forget(folder / "store.sqlite", unused)
        for path in unused.values():
            path.unlink(missing_ok=True)
    return len(unused)


def _forget(db_path: Path, unused: dict[str, Path]) -> None:
    db = sqlite3.connect(db_path, timeout=120, isolation_level=None)
    try:
        db.executescript(SCHEMA)
        db.execute("BEGIN IMMEDIATE")
        units = 0
        for chunk in chunks(list(unused), BATCH):
            marks = ",".join("?" * len(chunk))
            db.execute(f"DELETE FROM blobs WHERE sha IN ({marks})", chunk)
            db.execute(
                f"DELETE FROM defs WHERE unit IN (SELECT id FROM units WHERE blob IN ({marks}))", chunk
            )
            units += db.execute(f"DELETE FROM units WHERE blob IN ({marks})", chunk).rowcount
        db.execute("COMMIT")
        _compact_refs(db, units)
    finally:
        db.close()


def _compact_refs(db: sqlite3.Connection, deleted_units: int) -> None:
    """Drop the reference rows of deleted units, once they are a good share of the table.

    Rows of a deleted unit are never read (every query joins through a live snapshot's units),
    so they may wait; deleting them needs a full scan, worth it only now and then."""
    stale = int((db.execute("SELECT value FROM meta WHERE key = 'deleted_units'").fetchone() or ("0",))[0])
    live = db.execute("SELECT count(*) FROM units").fetchone()[0]
    stale += deleted_units
    if stale * 4 < live:
        db.execute("INSERT OR REPLACE INTO meta VALUES ('deleted_units', ?)", (str(stale),))
        return
    started = time.monotonic()
    db.execute("DELETE FROM refs WHERE unit NOT IN (SELECT id FROM units)")
    db.execute("INSERT OR REPLACE INTO meta VALUES ('deleted_units', '0')")
    log.info("compacted the symbol store in %.1f s", time.monotonic() - started)


def _unlinked_objects(objects: Path) -> dict[str, Path]:
    """Objects only the store links to (link count 1): no snapshot uses them."""
    unused: dict[str, Path] = {}
    if not objects.is_dir():
        return unused
    for folder in objects.iterdir():
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                if entry.name.startswith("."):
                    # A write that died half-way (its tmp file): nobody links it.
                    if entry.stat(follow_symlinks=False).st_mtime < time.time() - 3600:
                        os.unlink(entry.path)
                    continue
                if entry.stat(follow_symlinks=False).st_nlink <= 1:
                    unused[entry.name] = Path(entry.path)
    return unused


def _any_linked(objects: Path) -> bool:
    if not objects.is_dir():
        return False
    for folder in objects.iterdir():
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                if entry.stat(follow_symlinks=False).st_nlink > 1:
                    return True
    return False
