"""The search index's one SQLite file, shared by every repo and snapshot of a worker machine.

`<data_dir>/search_index/trigrams.sqlite` holds:

- `blobs`: one row per distinct file content (by digest) that any snapshot held;
- `grams`: an FTS5 table with the trigram tokenizer, `detail=none` (it keeps which blobs hold a
  trigram, no positions) and contentless (the text is not kept): about a quarter of the source's
  size (docs/search-index.md). Its rowid is the blob's id;
- `snapshots` and `files`: each indexed snapshot's paths and the blob each holds (NULL: a file
  not indexed, which every search reads).

A blob is indexed once, whichever snapshots hold it, so a refresh indexes only the content that
changed. The index holds only what the snapshot files hold: processed, redacted text.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from config.settings import Settings
from worker.ops.sqlite_wal import use_wal

INDEX_FOLDER = "search_index"
INDEX_FILE = "trigrams.sqlite"
FORMAT = 1  # bump when what is indexed changes: older rows are then not used

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS blobs (id INTEGER PRIMARY KEY, digest BLOB NOT NULL UNIQUE);
CREATE VIRTUAL TABLE IF NOT EXISTS grams USING fts5(text, tokenize='trigram', detail=none, content='');
CREATE TABLE IF NOT EXISTS snapshots (
    id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, repo TEXT NOT NULL, root TEXT NOT NULL,
    done INTEGER NOT NULL DEFAULT 0, format INTEGER NOT NULL DEFAULT {FORMAT});
CREATE TABLE IF NOT EXISTS files (
    snapshot INTEGER NOT NULL, path BLOB NOT NULL, blob INTEGER,
    dev INTEGER NOT NULL, ino INTEGER NOT NULL, size INTEGER NOT NULL, mtime INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS files_by_snapshot ON files (snapshot, blob);
CREATE INDEX IF NOT EXISTS files_by_blob ON files (blob, snapshot);
"""


def index_file(settings: Settings) -> Path:
    return settings.data_dir.resolve() / INDEX_FOLDER / INDEX_FILE


def snapshot_key(root: Path) -> str | None:
    """The snapshot at `root` as built: its path and its manifest's stamp (a snapshot rebuilt at
    the same path is another key); None without a manifest (such a snapshot is not indexed)."""
    from worker.repos.manifest import manifest_path

    try:
        stamp = manifest_path(root).stat().st_mtime_ns
    except OSError:
        return None
    return f"{root}@{stamp}"


def connect_for_writing(settings: Settings) -> sqlite3.Connection:
    path = index_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=60, isolation_level=None)
    use_wal(db)
    db.executescript(_SCHEMA)
    return db


def connect_for_reading(settings: Settings) -> sqlite3.Connection | None:
    """Read-only; None when no index was ever built here."""
    path = index_file(settings)
    if not path.exists():
        return None
    try:
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5, isolation_level=None)
    except sqlite3.Error:
        return None


def indexed_snapshots(db: sqlite3.Connection, keys: Iterable[str]) -> dict[str, int]:
    """key -> id of those snapshots whose index is complete and current."""
    wanted = list(keys)
    found: dict[str, int] = {}
    for start in range(0, len(wanted), 500):
        batch = wanted[start : start + 500]
        marks = ",".join("?" * len(batch))
        rows = db.execute(
            f"SELECT key, id FROM snapshots WHERE done = 1 AND format = ? AND key IN ({marks})",
            [FORMAT, *batch],
        )
        found.update(rows)
    return found


def candidate_paths(
    db: sqlite3.Connection, ids: list[int], expression: str
) -> dict[int, list[tuple[bytes, int]]]:
    """snapshot id -> (path, size in bytes) of the files whose content may match the FTS5
    `expression`, or that are not indexed; snapshots without any are left out."""
    found: dict[int, list[tuple[bytes, int]]] = {}
    if not ids:
        return found
    marks = ",".join("?" * len(ids))
    db.execute("CREATE TEMP TABLE IF NOT EXISTS hits (blob INTEGER PRIMARY KEY)")
    db.execute("DELETE FROM temp.hits")
    db.execute("INSERT INTO temp.hits SELECT rowid FROM grams WHERE grams MATCH ?", (expression,))
    rows = db.execute(
        f"SELECT f.snapshot, f.path, f.size FROM temp.hits h JOIN files f ON f.blob = h.blob "
        f"WHERE f.snapshot IN ({marks}) "
        f"UNION ALL SELECT snapshot, path, size FROM files WHERE blob IS NULL AND snapshot IN ({marks})",
        [*ids, *ids],
    )
    for snapshot, path, size in rows:
        found.setdefault(snapshot, []).append((path, size))
    return found
