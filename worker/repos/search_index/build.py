"""Indexing a served snapshot for search: after it serves, never before.

Every file of the snapshot's manifest is indexed (ignored, hidden and large ones too: which of
them a search reads is still ripgrep's decision, the index only says which cannot match). A file
whose inode, size and mtime equal a file of an already indexed snapshot of the repo is the same
processed blob (snapshots hardlink or move the store's objects), so a refresh reads only the
files that changed; a changed file is hashed, and its text is indexed only when no snapshot held
that content before.

A refresh whose build reused the previous build's record knows which paths differ from the
snapshot it replaces (`IndexBase`): the rows of every other path are copied from that
snapshot's index in one statement, and only the changed paths are looked at (a 2-file push into
10,000 files: 2 files, not 10,000 `lstat`s and row writes).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from config.settings import Settings
from worker.repos.manifest import FILE, load_manifest
from worker.repos.search_index.store import FORMAT, connect_for_writing, snapshot_key

log = logging.getLogger(__name__)

MAX_INDEXED_BYTES = 8 << 20  # a larger file is not indexed: every search reads it
_BATCH = 500  # files per write transaction: other repos' indexing and searches interleave
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # ripgrep transcodes such files: not indexed


@dataclass(frozen=True)
class IndexBase:
    """The snapshot a refresh replaced, and every path whose entry differs from it (changed in
    git, or written differently: worker/repos/assemble.py `Built.since`)."""

    root: Path
    changed: frozenset[str]


def index_snapshot(settings: Settings, repo: str, root: Path, base: IndexBase | None = None) -> bool:
    """Index the snapshot at `root` unless it is already; False when it cannot be (no manifest).
    With `base`, the rows of the paths that did not change are copied from its index."""
    key = snapshot_key(root)
    manifest = load_manifest(root)
    if key is None or manifest is None:
        return False
    db = connect_for_writing(settings)
    try:
        row = db.execute("SELECT id, done FROM snapshots WHERE key = ?", (key,)).fetchone()
        if row is not None and row[1]:
            return True
        _forget_rebuilt(db, key, root)
        if row is not None:  # a build that died half-way: start it again
            db.execute("DELETE FROM files WHERE snapshot = ?", (row[0],))
            snapshot_id = row[0]
        else:
            snapshot_id = db.execute(
                "INSERT INTO snapshots (key, repo, root) VALUES (?, ?, ?)", (key, repo, str(root))
            ).lastrowid
        paths = [e.path for e in manifest.entries if e.kind == FILE]
        if base is not None:
            copied = _copy_unchanged(db, snapshot_id, base, paths)
            paths = [p for p in paths if p not in copied]
        # A refresh hashes its few changed files; a whole snapshot first looks for its files'
        # inodes among those of the repo's indexed snapshots.
        known = _known_files(db, repo) if paths and base is None else {}
        for start in range(0, len(paths), _BATCH):
            db.execute("BEGIN IMMEDIATE")
            try:
                for path in paths[start : start + _BATCH]:
                    _index_file(db, snapshot_id, root, path, known)
            finally:
                db.execute("COMMIT")
        db.execute("UPDATE snapshots SET done = 1 WHERE id = ?", (snapshot_id,))
        _forget_gone(db, repo)
        return True
    finally:
        db.close()


def _copy_unchanged(db: sqlite3.Connection, snapshot_id: int, base: IndexBase, paths: list[str]) -> set[str]:
    """Copy the base snapshot's rows but those of the changed paths; the paths copied. None are
    when the base has no complete index of this format, or its rows are not exactly the
    unchanged `paths` (then the snapshot is indexed whole, as without a base)."""
    key = snapshot_key(base.root)
    found = db.execute("SELECT id FROM snapshots WHERE key = ? AND done = 1 AND format = ?", (key, FORMAT))
    row = found.fetchone() if key is not None else None
    if row is None:
        return set()
    unchanged = [p for p in paths if p not in base.changed]
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(
            "INSERT INTO files (snapshot, path, blob, dev, ino, size, mtime) "
            "SELECT ?, path, blob, dev, ino, size, mtime FROM files WHERE snapshot = ?",
            (snapshot_id, row[0]),
        )
        db.execute("CREATE TEMP TABLE IF NOT EXISTS changed (path BLOB PRIMARY KEY)")
        db.execute("DELETE FROM temp.changed")
        db.executemany(
            "INSERT OR IGNORE INTO temp.changed VALUES (?)", ((os.fsencode(p),) for p in base.changed)
        )
        db.execute(
            "DELETE FROM files WHERE snapshot = ? AND path IN (SELECT path FROM temp.changed)", (snapshot_id,)
        )
        copied = {path for (path,) in db.execute("SELECT path FROM files WHERE snapshot = ?", (snapshot_id,))}
        if copied != {os.fsencode(p) for p in unchanged}:  # never expected: every row is rewritten
            log.warning(
                "the search index of %s does not match its build's changes; indexing it whole", base.root.name
            )
            db.execute("DELETE FROM files WHERE snapshot = ?", (snapshot_id,))
            unchanged = []
    finally:
        db.execute("COMMIT")
    return set(unchanged)


def _known_files(db: sqlite3.Connection, repo: str) -> dict[tuple[int, int, int, int], int | None]:
    """(dev, ino, size, mtime) -> blob of the files of the repo's indexed snapshots."""
    rows = db.execute(
        "SELECT f.dev, f.ino, f.size, f.mtime, f.blob FROM files f JOIN snapshots s ON s.id = f.snapshot "
        "WHERE s.repo = ? AND s.done = 1",
        (repo,),
    )
    return {(dev, ino, size, mtime): blob for dev, ino, size, mtime, blob in rows}


def _index_file(
    db: sqlite3.Connection,
    snapshot_id: int,
    root: Path,
    path: str,
    known: dict[tuple[int, int, int, int], int | None],
) -> None:
    full = root / path
    try:
        stat = full.lstat()
    except OSError:
        return  # not written (a failed path): nothing to search there
    if not os.path.isfile(full) or os.path.islink(full):
        return
    identity = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if identity in known:
        blob = known[identity]
    else:
        blob = _blob_of(db, full, stat.st_size)
        known[identity] = blob
    db.execute(
        "INSERT INTO files (snapshot, path, blob, dev, ino, size, mtime) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (snapshot_id, os.fsencode(path), blob, *identity),
    )


def _blob_of(db: sqlite3.Connection, full: Path, size: int) -> int | None:
    """The blob id of the file's content, indexing it when new; None: not indexed."""
    if size > MAX_INDEXED_BYTES:
        return None
    try:
        content = full.read_bytes()
    except OSError:
        return None
    if content.startswith(_UTF16_BOMS):
        return None
    digest = hashlib.blake2b(content, digest_size=20).digest()
    row = db.execute("SELECT id FROM blobs WHERE digest = ?", (digest,)).fetchone()
    if row is not None:
        return int(row[0])
    blob = db.execute("INSERT INTO blobs (digest) VALUES (?)", (digest,)).lastrowid
    # ASCII survives a lossy decode intact, and the planner forms trigrams of ASCII only
    text = content.replace(b"\0", b"\n").decode("utf-8", errors="replace")
    db.execute("INSERT INTO grams (rowid, text) VALUES (?, ?)", (blob, text))
    return blob


def _forget_gone(db: sqlite3.Connection, repo: str) -> None:
    """The rows of the repo's snapshots that no longer exist (their blobs stay: see the doc)."""
    for snapshot_id, root in db.execute("SELECT id, root FROM snapshots WHERE repo = ?", (repo,)).fetchall():
        if not Path(root).is_dir():
            db.execute("DELETE FROM files WHERE snapshot = ?", (snapshot_id,))
            db.execute("DELETE FROM snapshots WHERE id = ?", (snapshot_id,))


def _forget_rebuilt(db: sqlite3.Connection, key: str, root: Path) -> None:
    """The rows of an earlier build of the same snapshot folder."""
    for (snapshot_id,) in db.execute(
        "SELECT id FROM snapshots WHERE root = ? AND key != ?", (str(root), key)
    ).fetchall():
        db.execute("DELETE FROM files WHERE snapshot = ?", (snapshot_id,))
        db.execute("DELETE FROM snapshots WHERE id = ?", (snapshot_id,))


def index_after_serving(settings: Settings, repo: str, root: Path, base: IndexBase | None = None) -> None:
    """What a sync calls once the snapshot serves: an index failure never fails the sync (search
    then reads every file of the snapshot, as without an index)."""
    try:
        index_snapshot(settings, repo, root, base)
    except (OSError, sqlite3.Error) as exc:
        log.warning("search index of %s not built: %s", repo, exc)
