"""The host-wide processed blob store: every git blob processed once, shared by all snapshots.

Layout under `<data_dir>/blobs/`:

    store.lock               flock: a snapshot build holds it shared, blob GC exclusive
    g<generation>/objects/<aa>/<sha>   a processed blob (worker/repos/blob_process.py), read-only
    g<generation>/store.sqlite         what each blob is, and its symbols (below)

A blob is keyed by its git SHA, so a file that did not change between two commits, or that two
repos share, is processed once. Snapshots are hardlinks to the objects, so a snapshot costs
directory entries, not copies, and an object's link count says how many snapshots use it:
when it falls to 1 (the store's own link), no snapshot does and blob GC deletes it.

The generation is a fingerprint of everything that decides what processing produces (the
redaction rules, detect-secrets' and the parsers' versions, our format): a codebot upgrade that
changes any of them starts a new generation, so every blob is processed again with the new
rules, and the old generation is deleted once no snapshot links into it.

store.sqlite (WAL; written by builds, read by questions):

    blobs(sha, kind, reason, lines)             one row per processed blob
    units(id, blob, grammar, language, family, status)   a blob parsed with a grammar
    defs(unit, seq, name, kind, container, line, end_line)   kept together by unit; one name
                                                index, without case (exact lookups filter it)
    names(name, id)                             each used name once, numbered (meta: next_name_id)
    refs(name_id, unit, lines)                  one row per name and unit, its lines packed
                                                (worker/repos/ref_lines.py)

Format 2 (STORE_FORMAT) packed the references and dropped the second name index and the
rowids: the database is less than half of format 1's (bench/RESULTS.md, "Disk ÷ .git").

A snapshot's own index (worker/repos/symbols.py) maps its paths to units, so a refresh after a
two-file commit parses two files and reuses every other file's rows.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.metadata
import logging
import os
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.ops.sqlite_wal import use_wal
from worker.repos.blob_worker import object_path, store_object
from worker.repos.secrets.redaction import ENGINE_REVISION, get_redactor

log = logging.getLogger(__name__)

# Bump when processing or the schema changes in a way the fingerprint below cannot see. 2: the
# references packed per (name, unit), one name index for definitions, names stored once.
STORE_FORMAT = "2"
BLOBS_FOLDER = "blobs"
_PACKAGES = ("detect-secrets", "google-re2")  # and the parsers: symbol_grammars.fingerprint()
BATCH = 500  # rows per statement
SCHEMA = """
CREATE TABLE IF NOT EXISTS blobs (sha TEXT PRIMARY KEY, kind TEXT NOT NULL, reason TEXT,
                                  lines INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS units (id INTEGER PRIMARY KEY AUTOINCREMENT, blob TEXT NOT NULL,
                                  grammar TEXT NOT NULL, language TEXT NOT NULL, family TEXT NOT NULL,
                                  status TEXT NOT NULL, UNIQUE (blob, grammar));
CREATE TABLE IF NOT EXISTS defs (unit INTEGER NOT NULL, seq INTEGER NOT NULL, name TEXT NOT NULL,
                                 kind TEXT NOT NULL, container TEXT, line INTEGER NOT NULL,
                                 end_line INTEGER NOT NULL, PRIMARY KEY (unit, seq)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS defs_by_name ON defs (name COLLATE NOCASE);
CREATE TABLE IF NOT EXISTS names (name TEXT PRIMARY KEY, id INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS refs (name_id INTEGER NOT NULL, unit INTEGER NOT NULL, lines BLOB NOT NULL,
                                 PRIMARY KEY (name_id, unit)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


@functools.cache
def generation() -> str:
    """The fingerprint of what processing produces; a new one means every blob is processed anew."""
    digest = hashlib.sha256(STORE_FORMAT.encode())
    digest.update(f"{ENGINE_REVISION}\n".encode())
    for rule in get_redactor().rules:
        digest.update(f"{rule!r}\n".encode())  # every field: kind, pattern, keywords, filters
    for package in _PACKAGES:
        try:
            digest.update(f"{package}={importlib.metadata.version(package)}\n".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{package}=?\n".encode())
    from worker.repos.symbol_grammars import fingerprint

    digest.update(fingerprint().encode())
    return digest.hexdigest()[:12]


@dataclass(frozen=True)
class BlobInfo:
    kind: str  # text, binary or withheld
    reason: str | None
    lines: int


class BlobStore:
    """One host's store, at `<data_dir>/blobs`."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / BLOBS_FOLDER
        self.generation = generation()
        self.folder = self.root / f"g{self.generation}"
        self.objects = self.folder / "objects"
        self.db_path = self.folder / "store.sqlite"
        self.lock_path = self.root / "store.lock"
        self._names: dict[str, int] = {}

    def object_path(self, sha: str) -> Path:
        return object_path(self.objects, sha)

    # --- locking ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def in_use(self) -> Iterator[None]:
        """Hold the store shared while building a snapshot: blob GC waits for it to end."""
        self.objects.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    # --- the database ----------------------------------------------------------------------

    def connect(self) -> sqlite3.Connection:
        self.folder.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.db_path, timeout=120, isolation_level=None)
        use_wal(db, within_seconds=120)
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(SCHEMA)
        return db

    def known(self, db: sqlite3.Connection, shas: Iterable[str]) -> dict[str, BlobInfo]:
        """The blobs among `shas` already processed (and still on disk)."""
        found: dict[str, BlobInfo] = {}
        for chunk in chunks(list(shas), BATCH):
            rows = db.execute(
                f"SELECT sha, kind, reason, lines FROM blobs WHERE sha IN ({','.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
            for sha, kind, reason, lines in rows:
                if self.object_path(sha).is_file():
                    found[sha] = BlobInfo(kind, reason, lines)
        return found

    def units(self, db: sqlite3.Connection, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """Unit ids of the (blob, grammar) pairs already parsed."""
        wanted = set(pairs)
        found: dict[tuple[str, str], int] = {}
        for chunk in chunks(sorted({blob for blob, _ in wanted}), BATCH):
            rows = db.execute(
                f"SELECT blob, grammar, id FROM units WHERE blob IN ({','.join('?' * len(chunk))})", chunk
            ).fetchall()
            found.update({(b, g): i for b, g, i in rows if (b, g) in wanted})
        return found

    def record_stored(
        self, db: sqlite3.Connection, sha: str, kind: str, reason: str | None, lines: int
    ) -> None:
        db.execute("INSERT OR REPLACE INTO blobs VALUES (?, ?, ?, ?)", (sha, kind, reason, lines))

    def withhold(self, db: sqlite3.Connection, sha: str, size: int, reason: str) -> None:
        """Record a blob that could not be processed: a placeholder, never its content."""
        from worker.repos.placeholders import WITHHELD, placeholder

        store_object(self.objects, sha, placeholder(WITHHELD, size, reason))
        self.record_stored(db, sha, WITHHELD, reason, 0)

    def record_parsed(self, db: sqlite3.Connection, sha: str, units: dict[str, Any]) -> None:
        """Store a blob's symbols: per grammar, its definitions and {name: packed lines} of its
        references (worker/repos/ref_lines.py), as the blob processor sends them."""
        try:
            with _write_transaction(db):
                for grammar, (language, family, definitions, references) in units.items():
                    db.execute("DELETE FROM units WHERE blob = ? AND grammar = ?", (sha, grammar))
                    unit = db.execute(
                        "INSERT INTO units (blob, grammar, language, family, status) VALUES (?, ?, ?, ?, 'ok')",
                        (sha, grammar, language, family),
                    ).lastrowid
                    db.executemany(
                        "INSERT INTO defs VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [
                            (unit, seq, name, kind, container, line, end)
                            for seq, (name, kind, container, line, end) in enumerate(definitions)
                        ],
                    )
                    ids = self._name_ids(db, set(references))
                    db.executemany(
                        "INSERT INTO refs VALUES (?, ?, ?)",
                        [(ids[name], unit, lines) for name, lines in references.items()],
                    )
        except sqlite3.Error:
            self._names.clear()  # numbers given in a transaction that may be rolled back
            raise

    def record_unparsed(self, db: sqlite3.Connection, sha: str, grammars: Iterable[str], reason: str) -> None:
        """Grammars that failed on a blob: no symbols, and no second try in this generation."""
        from worker.repos.symbol_grammars import GRAMMARS

        for grammar in grammars:
            db.execute(
                "INSERT OR IGNORE INTO units (blob, grammar, language, family, status) VALUES (?, ?, ?, ?, ?)",
                (sha, grammar, GRAMMARS[grammar].name, GRAMMARS[grammar].family, reason),
            )

    def _name_ids(self, db: sqlite3.Connection, names: set[str]) -> dict[str, int]:
        """The interned id of each name, new ones numbered from a counter in `meta` (names are
        keyed by their text, stored once; the caller holds the write lock, so no other build
        takes the same numbers)."""
        missing = [name for name in names if name not in self._names]
        for chunk in chunks(missing, BATCH):
            rows = db.execute(
                f"SELECT name, id FROM names WHERE name IN ({','.join('?' * len(chunk))})", chunk
            ).fetchall()
            self._names.update(rows)
        new = [name for name in missing if name not in self._names]
        if new:
            row = db.execute("SELECT value FROM meta WHERE key = 'next_name_id'").fetchone()
            first = int(row[0]) if row else 1
            numbered = list(zip(new, range(first, first + len(new)), strict=True))
            db.executemany("INSERT INTO names VALUES (?, ?)", numbered)
            db.execute("INSERT OR REPLACE INTO meta VALUES ('next_name_id', ?)", (str(first + len(new)),))
            self._names.update(numbered)
        return {name: self._names[name] for name in names}

    def linked_names(self, shas: Iterable[str]) -> list[str]:
        """How a snapshot's blob list names these objects of this generation ("g<gen>/<sha>")."""
        return [f"g{self.generation}/{sha}" for sha in shas]


@contextlib.contextmanager
def _write_transaction(db: sqlite3.Connection) -> Iterator[None]:
    """The caller's transaction (builds write in IMMEDIATE ones, many blobs each), or one of its own."""
    if db.in_transaction:
        yield
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
