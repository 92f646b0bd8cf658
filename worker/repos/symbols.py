"""A snapshot's symbol index: its paths mapped to symbols parsed once per blob (tree-sitter).

Symbols live in the host-wide blob store (worker/repos/blobstore.py), one "unit" per blob and
grammar, parsed when the blob is processed. A snapshot adds only its own small index,
`<repo>/manifests/<sha>.sqlite`, written when the snapshot is made:

    meta(key, value)                       format, the store it reads, file count, partial
    files(path, unit, language, family, is_test)
    skipped(path, language, reason)        files of a parsed language left out (too large)

so a refresh after a two-file commit parses two files, and a question runs a few indexed SQL
lookups joining these paths to the store's rows. Its languages are the grammars of
worker/repos/symbol_grammars.py (docs/tools.md lists them with their kinds).

A parse is bounded: a file larger than `symbols_max_file_bytes` is not parsed, and a blob whose
processing (redaction, then each parse) outlives `blob_timeout_seconds` or `blob_memory_bytes`
is stopped by the pool (worker/repos/blob_pool.py) and its unit recorded as failed. Either way
the sync goes on, and the file is listed as not indexed (`SymbolIndex.not_indexed`), never
silently missing.

The files indexed are the ones `search` sees: the build's one `rg --files` walk lists them with
the same exclusions (`.git`, secret files, `.gitignore`d files, symlinks not followed;
worker/repos/search_listing.py); the ones too large to parse are listed as not indexed. A reference is an identifier in code (never in a comment or a
string) whose name is defined somewhere in the same snapshot, in a language of the same family;
a definition's own name is not a reference. Symbols are parsed from the redacted text, so no name can carry a secret.
"""

from __future__ import annotations

import logging
import re
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from config.settings import Settings
from worker.repos.blobstore import BlobStore
from worker.repos.build_record import RECORD_SUFFIX
from worker.repos.ref_lines import count_lines, unpack_lines
from worker.repos.symbol_grammars import GRAMMARS
from worker.repos.symbols_index.name_table import forget_missing, snapshot_key

log = logging.getLogger(__name__)

INDEX_SUFFIX = ".sqlite"
INDEX_FORMAT = "3"  # 1 was a whole index per snapshot (symbols/<sha>.sqlite), before the blob store
READABLE_FORMATS = ("2", "3")  # 2 had no `skipped` table: an index made before an upgrade still answers
INDEX_FOLDER = "manifests"
LEGACY_INDEX_FOLDER = "symbols"
# Test code is listed after the code it tests: the model should see real uses first.
TEST_PATH = re.compile(
    r"(^|/)(tests?|__tests__|spec|testdata)/|(^|/)test_[^/]*$|_test\.\w+$|\.(test|spec)\.\w+$"
)


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
    not_indexed: int = 0  # files of a parsed language that are too large or failed to parse
    indexed: int = 0  # files whose symbols are in the index
    pending: int = 0  # files still being parsed: the snapshot serves before its index is whole


@dataclass(frozen=True)
class IndexedFile:
    path: str
    unit: int
    language: str
    family: str


@dataclass(frozen=True)
class SkippedFile:
    path: str
    language: str
    reason: str


def index_path(snapshot_root: Path) -> Path:
    """Where the index of the snapshot at `<repo>/snapshots/<sha>` is kept: `<repo>/manifests/<sha>.sqlite`
    (outside the snapshots folder, whose layout the lease protocol owns)."""
    return snapshot_root.parent.parent / INDEX_FOLDER / f"{snapshot_root.name}{INDEX_SUFFIX}"


def prune_indexes(repo_root: Path, current: str | None = None) -> list[str]:
    """Delete the indexes (and dead builds' temp files) of snapshots that no longer exist, the
    build records of all but the `current` one, and the per-snapshot indexes of the layout before
    the blob store.

    The mirrors call it after GC, under the repo's refresh lock; a snapshot that still exists
    may be leased, so its index is kept. Its build record is not: only the current snapshot's
    is the base of the next build (worker/repos/build_record.py)."""
    shutil.rmtree(repo_root / LEGACY_INDEX_FOLDER, ignore_errors=True)
    removed: list[str] = []
    folder = repo_root / INDEX_FOLDER
    if not folder.is_dir():
        return removed
    for entry in folder.iterdir():
        sha = entry.name.split(".", 1)[0]
        superseded = current is not None and sha != current and entry.name == f"{sha}{RECORD_SUFFIX}"
        if superseded or not (repo_root / "snapshots" / sha).is_dir():
            entry.unlink(missing_ok=True)
            removed.append(entry.name)
    gone = [snapshot_key(folder / name) for name in removed if name.endswith(INDEX_SUFFIX)]
    forget_missing(BlobStore(repo_root.parent.parent).db_path, gone)  # data_dir/repos/<name>
    return removed


class SymbolIndex:
    """Read-only lookups in one snapshot's index, joined to the blob store's symbols."""

    def __init__(self, path: Path, deadline: float | None = None) -> None:
        self.db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        if deadline is not None:  # a query still running then stops: sqlite3.OperationalError
            self.db.set_progress_handler(lambda: time.monotonic() > deadline, 2_000)
        try:
            meta = dict(self.db.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("format") not in READABLE_FORMATS:
                raise sqlite3.DatabaseError(f"index format {meta.get('format')!r}, not {INDEX_FORMAT}")
            store = (path.parent / meta["store"]).resolve()
            self.db.execute("ATTACH DATABASE ? AS s", (f"{store.as_uri()}?mode=ro",))
            # A store of format 1 (one row per referenced line) serves the snapshots made before
            # an upgrade until their repo syncs again (worker/repos/blobstore.py, STORE_FORMAT).
            self.packed_refs = any(row[1] == "lines" for row in self.db.execute("PRAGMA s.table_info(refs)"))
        except BaseException:
            self.db.close()
            raise
        self.meta = meta

    def close(self) -> None:
        self.db.close()

    def info(self) -> IndexInfo:
        failed = self.db.execute(
            "SELECT count(*) FROM files f JOIN s.units u ON u.id = f.unit WHERE u.status != 'ok'"
        ).fetchone()[0]
        skipped = 0
        if self.meta.get("format") != "2":
            skipped = self.db.execute("SELECT count(*) FROM skipped").fetchone()[0]
        files = int(self.meta.get("files", 0))
        return IndexInfo(
            files=files,
            # Files first (CROSS JOIN keeps the order): each file's definitions are together in
            # the store, while the name index the planner would rather scan is in name order.
            definitions=self.db.execute(
                "SELECT count(*) FROM files f CROSS JOIN s.defs d ON d.unit = f.unit"
            ).fetchone()[0],
            references=0,
            partial=self.meta.get("partial") == "1",
            pending=int(self.meta.get("pending") or 0),
            not_indexed=failed + skipped,
            indexed=files - failed,
        )

    def not_indexed(self, limit: int = 100_000) -> list[SkippedFile]:
        """The files of a parsed language that have no symbols, and why: too large to parse, or
        their parse failed (a time or memory bound, or a parser error), by path."""
        failed = self.db.execute(
            "SELECT f.path, f.language, u.status FROM files f JOIN s.units u ON u.id = f.unit "
            "WHERE u.status != 'ok' ORDER BY f.path LIMIT ?",
            (limit,),
        ).fetchall()
        rows = [SkippedFile(*row) for row in failed]
        if self.meta.get("format") != "2":
            rows += [
                SkippedFile(*row)
                for row in self.db.execute("SELECT path, language, reason FROM skipped LIMIT ?", (limit,))
            ]
        return sorted(rows, key=lambda f: f.path)[:limit]

    def definitions(self, name: str, container: str | None = None, nocase: bool = False) -> list[Definition]:
        # The store has one name index, case-insensitive: an exact lookup finds the names equal
        # but for case through it, then keeps the exact one.
        exact = "" if nocase else " AND d.name = ?"
        query = (
            "SELECT d.name, d.kind, d.container, f.path, d.line, d.end_line, f.language "
            f"FROM s.defs d JOIN files f ON f.unit = d.unit WHERE d.name = ? COLLATE NOCASE{exact}"
        )
        args: list[str] = [name] if nocase else [name, name]
        if container is not None:  # `Orders.Order` is in the namespace `Shop.Orders` too
            escaped = container.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            query += " AND (d.container = ? COLLATE NOCASE OR d.container LIKE ? ESCAPE '\\')"
            args += [container, f"%.{escaped}"]
        rows = self.db.execute(query + " ORDER BY f.path, d.line", args).fetchall()
        return [Definition(*row) for row in rows]

    def references(self, name: str, limit: int) -> tuple[list[Reference], int]:
        """(the first `limit` references, code before tests, how many there are in all).

        Only files of the language families that define `name` count: a Go package named
        `retry` is not a use of a Python function `retry`. The store packs the lines of a name
        in one file into one row (worker/repos/ref_lines.py): rows come in file order, and are
        unpacked only until `limit` lines are taken; the rest are counted, not unpacked."""
        where = (
            "FROM s.refs r JOIN files f ON f.unit = r.unit "
            "WHERE r.name_id = (SELECT id FROM s.names WHERE name = ?) AND f.family IN "
            "(SELECT g.family FROM s.defs d JOIN files g ON g.unit = d.unit "
            "WHERE d.name = ? COLLATE NOCASE AND d.name = ?)"
        )
        if not self.packed_refs:
            total = self.db.execute(f"SELECT count(*) {where}", (name, name, name)).fetchone()[0]
            listed = self.db.execute(
                f"SELECT ?, f.path, r.line {where} ORDER BY f.is_test, f.path, r.line LIMIT ?",
                (name, name, name, name, limit),
            )
            return [Reference(*row) for row in listed], total
        rows = self.db.execute(
            f"SELECT f.path, r.lines {where} ORDER BY f.is_test, f.path", (name, name, name)
        )
        found: list[Reference] = []
        total = 0
        for path, packed in rows:
            total += count_lines(packed)
            if len(found) < limit:
                found += [Reference(name, path, line) for line in unpack_lines(packed)[: limit - len(found)]]
        return found, total

    def names_like(self, fragment: str, limit: int = 2000) -> list[str]:
        """Defined names containing `fragment` or sharing its first letters, for "did you mean";
        past `limit`, the first ones by code point (the store's name index ignores case, so
        only then are they sorted)."""
        escaped = fragment.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = (
            "SELECT DISTINCT d.name FROM s.defs d JOIN files f ON f.unit = d.unit "
            "WHERE d.name LIKE ? ESCAPE '\\' OR d.name LIKE ? ESCAPE '\\'"
        )
        args = (f"%{escaped}%", f"{escaped[:2]}%")
        rows = self.db.execute(f"{query} LIMIT ?", (*args, limit + 1)).fetchall()
        if len(rows) > limit:
            rows = self.db.execute(f"{query} ORDER BY d.name LIMIT ?", (*args, limit)).fetchall()
        return [row[0] for row in rows]

    def top_level(self, path_prefix: str, kinds: tuple[str, ...]) -> list[tuple[str, str, int, int]]:
        """(name, path, line, end_line) of the definitions outside any container under a folder."""
        marks = ",".join("?" * len(kinds))
        return self.db.execute(
            "SELECT d.name, f.path, d.line, d.end_line FROM s.defs d JOIN files f ON f.unit = d.unit "
            f"WHERE f.path LIKE ? AND d.kind IN ({marks}) AND d.container IS NULL ORDER BY f.path, d.line",
            (path_prefix + "%", *kinds),
        ).fetchall()


def open_index(root: Path, settings: Settings | None = None, deadline: float | None = None) -> SymbolIndex:
    """The index of the snapshot at `root` (made with the snapshot; OSError if it has none);
    its queries stop at `deadline` (time.monotonic()) with sqlite3.OperationalError."""
    path = index_path(root)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    return SymbolIndex(path, deadline)


__all__ = [
    "GRAMMARS",
    "Definition",
    "IndexInfo",
    "IndexedFile",
    "Reference",
    "SkippedFile",
    "SymbolIndex",
    "index_path",
    "open_index",
    "prune_indexes",
]
