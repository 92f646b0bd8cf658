"""Opening a store while another process holds or switches it waits, not fails.

Two `codebot repos sync` threads opening one fresh blob store failed on CI with "database is
locked": SQLite refuses a journal-mode switch under another connection's lock without calling the
busy handler, so the connection timeout never applied (worker/ops/sqlite_wal.py).
"""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from worker.ops import sqlite_wal
from worker.repos.blobstore import BlobStore


def test_a_store_locked_by_another_connection_is_switched_to_wal_once_the_lock_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = sqlite3.connect(tmp_path / "store.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    pauses: list[float] = []

    def pause_then_release(seconds: float) -> None:
        pauses.append(seconds)
        holder.execute("COMMIT")  # the other process finishes while this one waits

    monkeypatch.setattr(sqlite_wal.time, "sleep", pause_then_release)
    db = sqlite3.connect(tmp_path / "store.db", timeout=0, isolation_level=None)
    sqlite_wal.use_wal(db)
    assert len(pauses) == 1
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_lock_that_never_ends_still_says_database_is_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = sqlite3.connect(tmp_path / "store.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(sqlite_wal.time, "sleep", lambda seconds: None)
    db = sqlite3.connect(tmp_path / "store.db", timeout=0, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        sqlite_wal.use_wal(db, within_seconds=0.05)


def test_two_threads_opening_one_fresh_blob_store_both_get_a_working_database(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "blobs")
    with ThreadPoolExecutor(8) as pool:
        modes = list(
            pool.map(lambda _: store.connect().execute("PRAGMA journal_mode").fetchone()[0], range(8))
        )
    assert modes == ["wal"] * 8
