"""Writing a snapshot's symbol index (worker/repos/symbols.py reads it): whole, or as the previous
snapshot's index with the changed paths' rows replaced, which is what a refresh costs.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

from worker.repos.symbols import INDEX_FORMAT, TEST_PATH, IndexedFile, SkippedFile

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, unit INTEGER NOT NULL,
                    language TEXT NOT NULL, family TEXT NOT NULL, is_test INTEGER NOT NULL);
CREATE INDEX files_by_unit ON files (unit);
CREATE TABLE skipped (path TEXT PRIMARY KEY, language TEXT NOT NULL, reason TEXT NOT NULL);
"""


def write_index(
    destination: Path,
    store_db: Path,
    files: Iterable[IndexedFile],
    partial: bool,
    skipped: Iterable[SkippedFile] = (),
    pending: int = 0,
) -> int:
    """Write a snapshot's index atomically; the number of files it maps."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    tmp = destination.with_name(f".{destination.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    rows = [(f.path, f.unit, f.language, f.family, bool(TEST_PATH.search(f.path))) for f in files]
    db = sqlite3.connect(tmp)
    try:
        db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;" + _SCHEMA)
        db.executemany(
            "INSERT INTO files (path, unit, language, family, is_test) VALUES (?, ?, ?, ?, ?)", rows
        )
        db.executemany(
            "INSERT OR IGNORE INTO skipped VALUES (?, ?, ?)",
            [(f.path, f.language, f.reason) for f in skipped],
        )
        store = os.path.relpath(store_db, destination.parent)
        meta = [
            ("format", INDEX_FORMAT),
            ("store", store),
            ("files", str(len(rows))),
            ("partial", str(int(partial))),
            ("pending", str(pending)),  # files whose symbols are still being parsed (after a first sync)
        ]
        db.executemany("INSERT INTO meta VALUES (?, ?)", meta)
        db.commit()
    finally:
        db.close()
    try:
        os.replace(tmp, destination)
    finally:
        tmp.unlink(missing_ok=True)
    return len(rows)


def update_index(
    source: Path,
    destination: Path,
    store_db: Path,
    remove: set[str],
    files: Iterable[IndexedFile],
    skipped: Iterable[SkippedFile] = (),
) -> bool:
    """Write at `destination` the index at `source` with the rows of `remove` taken out and
    `files` and `skipped` put in: a refresh's index costs its changed paths. False (nothing
    written) when `source` cannot be the base: another format or store, partial, or pending."""
    tmp = destination.with_name(f".{destination.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        shutil.copyfile(source, tmp)
        db = sqlite3.connect(tmp)
    except (OSError, sqlite3.Error):
        tmp.unlink(missing_ok=True)
        return False
    try:
        written = _apply(db, os.path.relpath(store_db, destination.parent), remove, files, skipped)
    except sqlite3.Error:
        written = False
    finally:
        db.close()
    try:
        if written:
            os.replace(tmp, destination)
    finally:
        tmp.unlink(missing_ok=True)
    return written


def _apply(
    db: sqlite3.Connection,
    store: str,
    remove: set[str],
    files: Iterable[IndexedFile],
    skipped: Iterable[SkippedFile],
) -> bool:
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    if (meta.get("format"), meta.get("store"), meta.get("partial"), meta.get("pending", "0")) != (
        INDEX_FORMAT,
        store,
        "0",
        "0",
    ):
        return False
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    gone = [(path,) for path in remove]
    db.executemany("DELETE FROM files WHERE path = ?", gone)
    db.executemany("DELETE FROM skipped WHERE path = ?", gone)
    db.executemany(
        "INSERT INTO files (path, unit, language, family, is_test) VALUES (?, ?, ?, ?, ?)",
        [(f.path, f.unit, f.language, f.family, bool(TEST_PATH.search(f.path))) for f in files],
    )
    db.executemany(
        "INSERT OR IGNORE INTO skipped VALUES (?, ?, ?)", [(f.path, f.language, f.reason) for f in skipped]
    )
    count = db.execute("SELECT count(*) FROM files").fetchone()[0]
    db.execute("UPDATE meta SET value = ? WHERE key = 'files'", (str(count),))
    db.commit()
    return True


def index_pending(path: Path) -> int:
    """How many files the index at `path` still waits to have parsed (0 when whole or unreadable)."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'pending'").fetchone()
    except sqlite3.Error:
        return 0
    finally:
        db.close()
    return int(row[0]) if row and str(row[0]).isdigit() else 0
