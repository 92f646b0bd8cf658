"""The symbol index of a snapshot: definitions and references found by a real parser (tree-sitter).

Built once per snapshot, when the snapshot is made (`build_index_quietly`, called by the
mirrors), and stored beside the snapshots as `<repo>/symbols/<sha>.sqlite`; a snapshot made
before this existed gets its index on first use (`open_index`). A question only runs indexed SQL
lookups. It covers Python, JavaScript, TypeScript (and JSX/TSX) and Go.

The files indexed are the ones `search` sees: ripgrep lists them with the same exclusions
(`.git`, secret files, `.gitignore`d files, symlinks not followed) and a size limit. A
reference is an identifier in code (never in a comment or a string) whose name is defined
somewhere in the same snapshot; a definition's own name is not a reference.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import subprocess
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from config.settings import Settings
from worker.repos.ripgrep import find_ripgrep
from worker.repos.symbol_grammars import GRAMMARS, LANGUAGE_OF_SUFFIX, FileSymbols, parse_file

log = logging.getLogger(__name__)

SCHEMA_VERSION = "1"  # bump when what is indexed changes: older indexes are rebuilt on first use
INDEX_FOLDER = "symbols"
_BATCH_FILES = 200
# Test code is listed after the code it tests: the model should see real uses first.
TEST_PATH = re.compile(
    r"(^|/)(tests?|__tests__|spec|testdata)/|(^|/)test_[^/]*$|_test\.\w+$|\.(test|spec)\.\w+$"
)
_build_lock = threading.Lock()  # one lazy build at a time in a process (each is CPU-bound anyway)


@dataclass(frozen=True)
class Definition:
    name: str
    kind: str  # function, method, class, interface, struct, type, enum, constant, variable, field, …
    container: str | None  # enclosing class/type, a Go method's receiver type or a Go package
    path: str
    line: int  # 1-based, as read_file counts
    end_line: int
    language: str


@dataclass(frozen=True)
class Reference:
    name: str
    path: str
    line: int


@dataclass(frozen=True)
class IndexInfo:
    files: int
    definitions: int
    references: int
    partial: bool  # more files than symbols_max_files: some were left out


def index_path(snapshot_root: Path) -> Path:
    """Where the index of the snapshot at `<repo>/snapshots/<sha>` is kept: `<repo>/symbols/<sha>.sqlite`
    (outside the snapshots folder, whose layout the lease protocol owns)."""
    return snapshot_root.parent.parent / INDEX_FOLDER / f"{snapshot_root.name}.sqlite"


def prune_indexes(repo_root: Path) -> list[str]:
    """Delete the indexes (and dead builds' temp files) of snapshots that no longer exist.

    The mirrors call it after GC, under the repo's refresh lock; a snapshot that still exists
    may be leased, so its index is kept."""
    removed: list[str] = []
    folder = repo_root / INDEX_FOLDER
    if not folder.is_dir():
        return removed
    for entry in folder.iterdir():
        sha = entry.name.split(".", 1)[0]
        if not (repo_root / "snapshots" / sha).is_dir():
            entry.unlink(missing_ok=True)
            removed.append(entry.name)
    return removed


def indexable_files(root: Path, settings: Settings) -> list[str]:
    """Paths (relative, sorted) of the files search would see that a grammar can parse."""
    command = [
        find_ripgrep(),
        "--files",
        "--no-config",
        "--no-messages",
        "--hidden",
        "--no-require-git",
        "--no-ignore-parent",
        "--no-ignore-global",
        f"--max-filesize={settings.symbols_max_file_bytes}",
        *(f"--glob=*{suffix}" for suffix in LANGUAGE_OF_SUFFIX),
        "--iglob=!.git",
        *(f"--iglob=!{secret}" for secret in settings.secret_file_globs),
    ]
    done = subprocess.run(
        command,
        cwd=root,
        stdin=subprocess.DEVNULL,  # given no path and a pipe or file on stdin, rg would search stdin
        capture_output=True,
        timeout=settings.search_timeout_seconds * 6,
        env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C.UTF-8"},
    )
    if done.returncode not in (0, 1):  # 1: no file at all
        raise OSError(f"ripgrep could not list the files: {done.stderr.decode(errors='replace')[:300]}")
    paths = [p.removeprefix("./") for p in done.stdout.decode("utf-8", errors="replace").splitlines()]
    return sorted(p for p in paths if p and not os.path.islink(root / p))


def _parsed(root: Path, paths: Iterable[str]) -> Iterator[tuple[str, FileSymbols]]:
    for path in paths:
        try:
            source = (root / path).read_bytes()
        except OSError:
            continue
        symbols = parse_file(path, source)
        if symbols is not None:
            yield path, symbols


_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, language TEXT NOT NULL,
                    family TEXT NOT NULL, is_test INTEGER NOT NULL);
CREATE TABLE defs (name TEXT NOT NULL, kind TEXT NOT NULL, container TEXT, file_id INTEGER NOT NULL,
                   line INTEGER NOT NULL, end_line INTEGER NOT NULL);
CREATE TEMP TABLE all_refs (name TEXT NOT NULL, file_id INTEGER NOT NULL, line INTEGER NOT NULL);
CREATE TABLE refs (name TEXT NOT NULL, file_id INTEGER NOT NULL, line INTEGER NOT NULL,
                   PRIMARY KEY (name, file_id, line)) WITHOUT ROWID;
"""
_INDEXES = """
INSERT OR IGNORE INTO refs SELECT name, file_id, line FROM all_refs
    WHERE name IN (SELECT name FROM defs);
DROP TABLE all_refs;
CREATE INDEX defs_by_name ON defs (name);
CREATE INDEX defs_by_name_nocase ON defs (name COLLATE NOCASE);
"""


def build_index(root: Path, destination: Path, settings: Settings) -> IndexInfo:
    """Parse every indexable file under `root` and write the index to `destination` atomically."""
    paths = indexable_files(root, settings)
    partial = len(paths) > settings.symbols_max_files
    paths = paths[: settings.symbols_max_files]
    destination.parent.mkdir(parents=True, exist_ok=True)
    tmp = destination.with_name(f"{destination.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    db = sqlite3.connect(tmp)
    try:
        db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;" + _SCHEMA)
        files = 0
        batch: list[tuple[int, str, FileSymbols]] = []
        for file_id, (path, symbols) in enumerate(_parsed(root, paths), start=1):
            batch.append((file_id, path, symbols))
            files += 1
            if len(batch) >= _BATCH_FILES:
                _insert(db, batch)
                batch = []
        _insert(db, batch)
        db.executescript(_INDEXES)
        info = IndexInfo(
            files=files,
            definitions=db.execute("SELECT count(*) FROM defs").fetchone()[0],
            references=db.execute("SELECT count(*) FROM refs").fetchone()[0],
            partial=partial,
        )
        db.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [("version", SCHEMA_VERSION), ("files", str(info.files)), ("partial", str(int(partial)))],
        )
        db.commit()
    finally:
        db.close()
    try:
        os.replace(tmp, destination)
    finally:
        tmp.unlink(missing_ok=True)
    return info


def _insert(db: sqlite3.Connection, batch: list[tuple[int, str, FileSymbols]]) -> None:
    db.executemany(
        "INSERT INTO files VALUES (?, ?, ?, ?, ?)",
        [(i, p, s.language, s.family, bool(TEST_PATH.search(p))) for i, p, s in batch],
    )
    db.executemany(
        "INSERT INTO defs VALUES (?, ?, ?, ?, ?, ?)",
        [(d.name, d.kind, d.container, i, d.line, d.end_line) for i, _, s in batch for d in s.definitions],
    )
    db.executemany(
        "INSERT INTO all_refs VALUES (?, ?, ?)",
        [(name, i, line) for i, _, s in batch for name, line in s.references],
    )


def build_index_quietly(root: Path, destination: Path, settings: Settings) -> None:
    """For the mirrors: index a new snapshot; a failure is logged (the index is then built on
    first use) and never fails the sync."""
    try:
        info = build_index(root, destination, settings)
        log.info(
            "indexed %s: %d files, %d definitions, %d references%s",
            destination.name,
            info.files,
            info.definitions,
            info.references,
            " (partial)" if info.partial else "",
        )
    except Exception as exc:
        log.warning("symbol index of %s failed: %s", root, exc)


class SymbolIndex:
    """Read-only lookups in one snapshot's index."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)

    def close(self) -> None:
        self.db.close()

    def info(self) -> IndexInfo:
        meta = dict(self.db.execute("SELECT key, value FROM meta").fetchall())
        return IndexInfo(
            files=int(meta.get("files", 0)),
            definitions=self.db.execute("SELECT count(*) FROM defs").fetchone()[0],
            references=0,
            partial=meta.get("partial") == "1",
        )

    def definitions(self, name: str, container: str | None = None, nocase: bool = False) -> list[Definition]:
        collate = " COLLATE NOCASE" if nocase else ""
        query = (
            "SELECT d.name, d.kind, d.container, f.path, d.line, d.end_line, f.language "
            f"FROM defs d JOIN files f ON f.id = d.file_id WHERE d.name = ?{collate}"
        )
        args: list[str] = [name]
        if container is not None:
            query += " AND d.container = ? COLLATE NOCASE"
            args.append(container)
        rows = self.db.execute(query + " ORDER BY f.path, d.line", args).fetchall()
        return [Definition(*row) for row in rows]

    def references(self, name: str, limit: int) -> tuple[list[Reference], int]:
        """(the first `limit` references, code before tests, how many there are in all).

        Only files of the language families that define `name` count: a Go package named
        `retry` is not a use of a Python function `retry`."""
        where = (
            "FROM refs r JOIN files f ON f.id = r.file_id WHERE r.name = ? AND f.family IN "
            "(SELECT g.family FROM defs d JOIN files g ON g.id = d.file_id WHERE d.name = ?)"
        )
        total = self.db.execute(f"SELECT count(*) {where}", (name, name)).fetchone()[0]
        rows = self.db.execute(
            f"SELECT r.name, f.path, r.line {where} ORDER BY f.is_test, f.path, r.line LIMIT ?",
            (name, name, limit),
        ).fetchall()
        return [Reference(*row) for row in rows], total

    def names_like(self, fragment: str, limit: int = 2000) -> list[str]:
        """Defined names containing `fragment` or sharing its first letters, for "did you mean"."""
        escaped = fragment.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self.db.execute(
            "SELECT DISTINCT name FROM defs WHERE name LIKE ? ESCAPE '\\' OR name LIKE ? ESCAPE '\\' LIMIT ?",
            (f"%{escaped}%", f"{escaped[:2]}%", limit),
        ).fetchall()
        return [row[0] for row in rows]


def _is_current(path: Path) -> bool:
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
        return bool(row) and row[0] == SCHEMA_VERSION
    except sqlite3.Error:
        return False
    finally:
        db.close()


def open_index(root: Path, settings: Settings) -> SymbolIndex:
    """The index of the snapshot at `root`, built now if it is missing or from an older version."""
    path = index_path(root)
    if not (path.is_file() and _is_current(path)):
        with _build_lock:
            if not (path.is_file() and _is_current(path)):
                build_index(root, path, settings)
    return SymbolIndex(path)


__all__ = [
    "GRAMMARS",
    "Definition",
    "IndexInfo",
    "Reference",
    "SymbolIndex",
    "build_index",
    "build_index_quietly",
    "index_path",
    "open_index",
    "prune_indexes",
]
