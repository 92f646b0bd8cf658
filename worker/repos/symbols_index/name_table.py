"""The host's table of defined names: which snapshot defines which name, one query for all repos.

A name that is defined nowhere used to cost, per repo in scope, opening its index and scanning
every definition for "did you mean" (~70 ms a repo). Here, beside the blob store of the same
generation (`g<gen>/names.sqlite`, WAL), each snapshot's distinct definition names are listed
once, when its index is written:

    snapshots(id, key, pending, partial, not_indexed, sample)   key: the index file's path
    names(id, name)                 every defined name once; a NOCASE index, and names_fts, a
                                    trigram index (FTS5) for "names containing ..."
    holds(name_id, snapshot)        the snapshots that define a name

so whether any repo in scope defines a name (whatever its case), and the names in scope that
look like it, are one query each whatever the number of repos. Only names of the snapshot's
indexed files are listed (its `files` rows): a withheld (secret) file is never parsed, so its
names are in no row, and a question sees the names of its own scope's snapshots only.

A snapshot's rows are removed before its index is (re)written and put back after, so rows are
never staler than the index file; a snapshot without rows (a build that failed half-way, an
index of another generation, made before this table existed) is answered from its own index
as before (worker/tools/navigation_lookup.py).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from worker.ops.sqlite_wal import use_wal

log = logging.getLogger(__name__)

NAMES_FILE = "names.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS snapshots (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE,
    pending INTEGER NOT NULL, partial INTEGER NOT NULL, not_indexed INTEGER NOT NULL, sample TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS names (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE INDEX IF NOT EXISTS names_nocase ON names (name COLLATE NOCASE);
CREATE VIRTUAL TABLE IF NOT EXISTS names_fts USING fts5(name, content='names', content_rowid='id',
    tokenize='trigram');
CREATE TRIGGER IF NOT EXISTS names_listed AFTER INSERT ON names BEGIN
    INSERT INTO names_fts (rowid, name) VALUES (new.id, new.name);
END;
CREATE TABLE IF NOT EXISTS holds (name_id INTEGER NOT NULL, snapshot INTEGER NOT NULL,
    PRIMARY KEY (name_id, snapshot)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS holds_by_snapshot ON holds (snapshot);
"""
# The scope's snapshot ids, one JSON array. Queries go name first, then the few snapshots that
# hold it (`+h.snapshot`: no index on it), each checked against this list, built once.
_IN_SCOPE = "SELECT value FROM json_each(:ids)"
SAMPLE = 3  # files not indexed named in a miss's answer


@dataclass(frozen=True)
class Listed:
    """A snapshot the table lists: its id and what a miss says of its index."""

    id: int
    pending: int  # files still waiting to be parsed
    partial: bool  # more files than symbols_max_files
    not_indexed: int  # files of a parsed language without symbols (too large, parse failed)
    sample: list[tuple[str, str]]  # the first few of those, (path, reason)


def table_path(store_db: Path) -> Path:
    return store_db.with_name(NAMES_FILE)


def snapshot_key(index: Path) -> str:
    """How the table names the snapshot whose index is at `index`: its absolute path, not
    resolved (a question computes it for every repo in scope; the mirrors' root is resolved
    already). A path spelled otherwise only finds no row: that repo is read from its index."""
    return os.path.abspath(index)


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=60, isolation_level=None)
    use_wal(db)
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(_SCHEMA)
    return db


def forget(store_db: Path, index: Path) -> None:
    """Take the snapshot whose index is at `index` out of the table (before its index changes)."""
    try:
        db = _connect(table_path(store_db))
    except sqlite3.Error as exc:
        log.warning("the name table cannot be opened (%s); navigation reads each index instead", exc)
        return
    try:
        _forget(db, snapshot_key(index))
    except sqlite3.Error as exc:
        log.warning("the name table could not forget %s: %s", index.name, exc)
    finally:
        db.close()


def _forget(db: sqlite3.Connection, key: str) -> None:
    with db:  # isolation_level=None: `with` does not begin; BEGIN IMMEDIATE does
        db.execute("BEGIN IMMEDIATE")
        db.execute("DELETE FROM holds WHERE snapshot IN (SELECT id FROM snapshots WHERE key = ?)", (key,))
        db.execute("DELETE FROM snapshots WHERE key = ?", (key,))


def list_snapshot(store_db: Path, index: Path, base: tuple[Path, set[str]] | None = None) -> bool:
    """List the names the index at `index` defines (read with the store at `store_db`); False
    (the snapshot stays unlisted, and is read from its index) if the table cannot be written.
    `base`: the index it was made from and the paths changed since; when that one is listed,
    its rows are copied and only the changed paths' names looked at (a refresh's cost)."""
    try:
        db = _connect(table_path(store_db))
    except sqlite3.Error as exc:
        log.warning("the name table cannot be opened (%s); navigation reads each index instead", exc)
        return False
    try:
        db.execute("ATTACH DATABASE ? AS idx", (f"{index.resolve().as_uri()}?mode=ro",))
        db.execute("ATTACH DATABASE ? AS s", (f"{store_db.resolve().as_uri()}?mode=ro",))
        from_id = _listed_id(db, snapshot_key(base[0])) if base is not None else None
        if base is not None and from_id is not None:
            db.execute("ATTACH DATABASE ? AS old", (f"{base[0].resolve().as_uri()}?mode=ro",))
            _list(db, snapshot_key(index), (from_id, base[1]))
        else:
            _list(db, snapshot_key(index))
        return True
    except sqlite3.Error as exc:
        log.warning("the name table could not list %s: %s", index.name, exc)
        return False
    finally:
        db.close()


def _listed_id(db: sqlite3.Connection, key: str) -> int | None:
    row = db.execute("SELECT id FROM snapshots WHERE key = ?", (key,)).fetchone()
    return int(row[0]) if row else None


_DEFINED_IN_CHANGED = (
    "SELECT DISTINCT d.name FROM {db}.files f JOIN temp.changed c ON c.path = f.path "
    "CROSS JOIN s.defs d ON d.unit = f.unit"
)


def _list(db: sqlite3.Connection, key: str, base: tuple[int, set[str]] | None = None) -> None:
    meta = dict(db.execute("SELECT key, value FROM idx.meta").fetchall())
    has_skipped = meta.get("format") != "2"
    not_indexed = db.execute(
        "SELECT f.path, u.status FROM idx.files f JOIN s.units u ON u.id = f.unit WHERE u.status != 'ok'"
        + (" UNION ALL SELECT path, reason FROM idx.skipped" if has_skipped else "")
        + " ORDER BY 1"
    ).fetchall()
    if base is None:  # files first (CROSS JOIN keeps the order): a file's definitions are together
        db.execute(
            "CREATE TEMP TABLE defined AS "
            "SELECT DISTINCT d.name FROM idx.files f CROSS JOIN s.defs d ON d.unit = f.unit"
        )
    else:
        db.execute("CREATE TEMP TABLE changed (path TEXT PRIMARY KEY)")
        db.executemany("INSERT INTO temp.changed VALUES (?)", [(path,) for path in base[1]])
        db.execute(f"CREATE TEMP TABLE defined AS {_DEFINED_IN_CHANGED.format(db='idx')}")
        # Names the changed paths defined before: gone unless another file still defines them.
        db.execute(
            f"CREATE TEMP TABLE gone AS SELECT name FROM ({_DEFINED_IN_CHANGED.format(db='old')}) g "
            "WHERE NOT EXISTS (SELECT 1 FROM s.defs d JOIN idx.files f ON f.unit = d.unit "
            "WHERE d.name = g.name COLLATE NOCASE AND d.name = g.name)"
        )
    with db:
        db.execute("BEGIN IMMEDIATE")
        db.execute("DELETE FROM holds WHERE snapshot IN (SELECT id FROM snapshots WHERE key = ?)", (key,))
        db.execute("DELETE FROM snapshots WHERE key = ?", (key,))
        snapshot = db.execute(
            "INSERT INTO snapshots (key, pending, partial, not_indexed, sample) VALUES (?, ?, ?, ?, ?)",
            (
                key,
                int(meta.get("pending") or 0),
                int(meta.get("partial") == "1"),
                len(not_indexed),
                json.dumps(not_indexed[:SAMPLE]),
            ),
        ).lastrowid
        if base is not None:
            db.execute(
                "INSERT INTO holds SELECT name_id, ? FROM holds WHERE snapshot = ?", (snapshot, base[0])
            )
            db.execute(
                "DELETE FROM holds WHERE snapshot = ? AND name_id IN "
                "(SELECT n.id FROM temp.gone g JOIN names n ON n.name = g.name)",
                (snapshot,),
            )
        db.execute("INSERT OR IGNORE INTO names (name) SELECT name FROM temp.defined")
        db.execute(
            "INSERT OR IGNORE INTO holds SELECT n.id, ? FROM temp.defined t JOIN names n ON n.name = t.name",
            (snapshot,),
        )
    for table in ("defined", "changed", "gone"):
        db.execute(f"DROP TABLE IF EXISTS temp.{table}")


def forget_missing(store_db: Path, keys: list[str]) -> None:
    """Take out the snapshots whose indexes were pruned (keys as `snapshot_key` makes them)."""
    path = table_path(store_db)
    if not keys or not path.is_file():
        return
    try:
        db = _connect(path)
    except sqlite3.Error:
        return
    try:
        for key in keys:
            _forget(db, key)
    except sqlite3.Error as exc:
        log.warning("the name table could not forget pruned snapshots: %s", exc)
    finally:
        db.close()


class NameTable:
    """Read-only lookups for a question: every snapshot of its scope at once.

    `deadline` (time.monotonic()) stops a query that runs past it: sqlite3.OperationalError."""

    def __init__(self, store_db: Path, deadline: float | None = None) -> None:
        path = table_path(store_db)
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist")
        self.db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        if deadline is not None:
            self.db.set_progress_handler(lambda: time.monotonic() > deadline, 2_000)

    def close(self) -> None:
        self.db.close()

    def listed(self, keys: list[str]) -> dict[str, Listed]:
        """The snapshots among `keys` the table lists, by key."""
        rows = self.db.execute(
            f"SELECT key, id, pending, partial, not_indexed, sample FROM snapshots WHERE key IN ({_IN_SCOPE})",
            {"ids": json.dumps(keys)},
        ).fetchall()
        return {
            key: Listed(id_, pending, bool(partial), count, [tuple(s) for s in json.loads(sample)])
            for key, id_, pending, partial, count, sample in rows
        }

    def holders(self, ids: list[int], name: str) -> set[int]:
        """The snapshots among `ids` that define `name`, in any case."""
        rows = self.db.execute(
            "SELECT DISTINCT h.snapshot FROM names n CROSS JOIN holds h ON h.name_id = n.id "
            f"WHERE n.name = :name COLLATE NOCASE AND +h.snapshot IN ({_IN_SCOPE})",
            {"name": name, "ids": json.dumps(ids)},
        ).fetchall()
        return {row[0] for row in rows}

    def names_like(self, ids: list[int], fragment: str, limit: int = 2000) -> list[str]:
        """Names defined in the snapshots `ids` sharing the first two letters of `fragment` (any
        case), or containing it when it has three letters or more: for "did you mean"."""
        held = f"EXISTS (SELECT 1 FROM holds h WHERE h.name_id = n.id AND +h.snapshot IN ({_IN_SCOPE}))"
        prefix = fragment[:2]
        query = (
            "SELECT n.name FROM names n WHERE n.name >= :low COLLATE NOCASE "
            f"AND n.name < :high COLLATE NOCASE AND {held}"
        )
        args: dict[str, object] = {"ids": json.dumps(ids), "low": prefix, "high": prefix + "\U0010ffff"}
        if len(fragment) >= 3:  # the trigram index answers LIKE for three letters or more
            query += (
                " UNION SELECT n.name FROM names_fts JOIN names n ON n.id = names_fts.rowid "
                f"WHERE names_fts.name LIKE :contains AND {held}"
            )
            args["contains"] = f"%{fragment}%"
        rows = self.db.execute(f"{query} LIMIT :limit", {**args, "limit": limit}).fetchall()
        return [row[0] for row in rows]
