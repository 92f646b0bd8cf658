"""Making a snapshot from processed blobs: list the tree, check it, process what is new, link.

`build_snapshot` turns one commit of a git repository into a snapshot folder:

1. `git ls-tree -r -l -z` lists every entry with its mode and size before anything is written,
   so the caps (`snapshot_max_files`, `snapshot_max_bytes`) and the free disk space are checked
   first: a commit over a cap is refused with the reason, and nothing is extracted.
2. Entries are decided by path: secret file names (`secret_file_globs`) and `.git` are never
   materialized; a symlink whose target names a secret file, or leads to one inside the tree,
   is left out like that file; a path git should never have stored (`..`, empty parts) is skipped.
   A blob secret by lineage (worker/repos/lineage.py: a secret file's name in any commit of the
   mirror, or descent from one) becomes a "withheld" placeholder: never processed, parsed,
   searched or read, whatever its name here.
3. Blobs the host's store (worker/repos/blobstore.py) has not processed yet are processed by a
   pool of bounded processes (worker/repos/blob_pool.py); so are the (blob, grammar) pairs not
   parsed yet. A refresh after a two-file commit processes two blobs.
4. The folder is assembled from hardlinks to the processed objects (a copy when a link is
   impossible), empty files, placeholders for oversized files, and the symlinks last (so no
   link can redirect where a file is written). Cost: one directory entry per file.
5. The snapshot's symbol index (worker/repos/symbols.py) maps the files `search` sees to their
   parsed units, and its manifest (worker/repos/manifest.py) lists its paths for the tools.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.settings import Settings
from worker.repos import lineage
from worker.repos.blob_pool import PoolLimits, Task, run_tasks
from worker.repos.blobstore import BlobInfo, BlobStore
from worker.repos.build_record import BuildRecord, load_record, record_key, record_path, save_record
from worker.repos.disk import DiskFull, check_room, free_bytes, human_bytes
from worker.repos.git_read import GitReadError
from worker.repos.manifest import FILE, LINK, MANIFEST_SUFFIX, ManifestEntry, write_manifest
from worker.repos.materialize import MoveFrom, materialize
from worker.repos.placeholders import TEXT
from worker.repos.snapshot import LANGUAGES_BY_SUFFIX, README_NAMES, SNAPSHOT_FORMAT, SnapshotMeta
from worker.repos.snapshot_plan import (
    Plan,
    SnapshotRefused,
    check_caps,
    hide_secret_links,
    make_plan,
    parse_pairs,
    stored_sizes,
)
from worker.repos.symbol_grammars import GRAMMARS, grammar_of
from worker.repos.symbol_index_write import update_index, write_index
from worker.repos.symbols import INDEX_SUFFIX, IndexedFile, SkippedFile, indexable_files
from worker.repos.tree_listing import TreeEntry, changed_tree, list_tree, read_small_blobs
from worker.repos.visible import shown_name

log = logging.getLogger(__name__)

Progress = Callable[[str, float | None], None]
_PER_FILE_BYTES = 512  # directory entry, inode and index row: what a file costs beyond its content
_COMMIT_EVERY = 300  # store rows written per transaction while processing


@dataclass
class Processing:
    """Writes the pool's outcomes into the store, and reports progress."""

    store: BlobStore
    db: Any
    sizes: dict[str, int]
    infos: dict[str, BlobInfo]
    report: Progress
    total: int
    settings: Settings
    done: int = 0
    pending: int = 0
    last_report: float = 0.0

    def __call__(self, message: tuple[Any, ...]) -> None:
        outcome, sha = message[0], message[1]
        if outcome == "stored":
            _, _, kind, reason, lines, _ = message
            self.store.record_stored(self.db, sha, kind, reason, lines)
            self.infos[sha] = BlobInfo(kind, reason, lines)
            return
        if outcome == "parsed":
            self.store.record_parsed(self.db, sha, message[2])
        elif outcome == "failed":
            stage, reason = message[2], message[3]
            if stage == "stored":
                self.store.withhold(self.db, sha, self.sizes.get(sha, 0), reason)
                self.infos[sha] = BlobInfo("withheld", reason, 0)
            else:
                self.store.record_unparsed(self.db, sha, GRAMMARS, f"failed: {reason}")
        self.done += 1
        self.pending += 1
        if self.pending >= _COMMIT_EVERY:
            self.db.execute("COMMIT")
            self.db.execute("BEGIN IMMEDIATE")
            self.pending = 0
            if free_bytes(self.store.root) < self.settings.disk_reserve_bytes:
                check_room(self.store.root, 0, self.settings.disk_reserve_bytes, "go on processing files")
        now = time.monotonic()
        if now - self.last_report >= 0.5:
            self.last_report = now
            self.report(
                f"processing files {self.done:,}/{self.total:,}", 0.85 + 0.13 * self.done / max(1, self.total)
            )


def _suffix(path: str) -> str:
    """os.path.splitext's suffix of the file name (".bashrc" has none), without its cost."""
    name = path[path.rfind("/") + 1 :]
    dot = name.rfind(".")
    return name[dot:] if dot > 0 and name[:dot].strip(".") else ""


def _describe(plan: Plan, infos: dict[str, BlobInfo], failed: set[str], settings: Settings) -> SnapshotMeta:
    files = [e for e in plan.files if e.path not in failed]
    lineage_withheld = [e for e, _ in plan.withheld if e.path not in failed]
    links = [e for e in plan.links if e.path not in failed]
    shown = (*files, *lineage_withheld, *links)
    suffixes = Counter(_suffix(e.path) for e in shown)
    languages: Counter[str] = Counter()
    for suffix, count in suffixes.items():
        if language := LANGUAGES_BY_SUFFIX.get(suffix.lower()):
            languages[language] += count
    top = {shown_name(e.path.split("/", 1)[0]) + ("/" if "/" in e.path else "") for e in shown}
    top |= {shown_name(e.path.split("/", 1)[0]) + "/" for e in plan.submodules}
    readable_at_root = {
        e.path
        for e in files
        if "/" not in e.path and (e.size == 0 or infos.get(e.sha, BlobInfo("", None, 0)).kind == TEXT)
    }
    withheld = sum(1 for e in files if infos.get(e.sha) is not None and infos[e.sha].kind == "withheld")
    return SnapshotMeta(
        file_count=len(files) + len(lineage_withheld) + len(links),
        size_bytes=sum(e.size for e in (*files, *lineage_withheld)),
        languages=dict(languages.most_common()),
        top_level=tuple(sorted(top)),
        readme=next((name for name in README_NAMES if name in readable_at_root), None),
        withheld=plan.hidden + withheld + len(lineage_withheld),
        oversized=sum(1 for e in files if e.size > settings.blob_max_bytes),
    )


def _manifest_entries(plan: Plan, failed: set[str]) -> list[ManifestEntry]:
    """What the snapshot shows, for tools to look up instead of walking (worker/repos/manifest.py)."""
    files = [ManifestEntry(e.path, FILE, e.size) for e in plan.files if e.path not in failed]
    files += [ManifestEntry(e.path, FILE, e.size) for e, _ in plan.withheld if e.path not in failed]
    return files + [ManifestEntry(e.path, LINK, 0) for e in plan.links if e.path not in failed]


_IGNORE_FILES = {".gitignore", ".ignore", ".rgignore"}  # decide what `rg --files` lists


def _indexable(root: Path, settings: Settings, record: BuildRecord | None, touched: set[str]) -> list[str]:
    """What `rg --files` lists in the new snapshot: the previous build's list when no path was
    added and no ignore file changed (the files that stay are the same files), else listed."""
    listed = record.indexable if record is not None and not record.failed else None
    if listed is not None and not any(path.rsplit("/", 1)[-1] in _IGNORE_FILES for path in touched):
        return listed
    return indexable_files(root, settings)


def write_snapshot_index(
    listed: list[str],
    plan: Plan,
    failed: set[str],
    units: dict[tuple[str, str], int],
    destination: Path,
    store: BlobStore,
    settings: Settings,
    pending: int = 0,
    base: tuple[Path, set[str]] | None = None,
) -> None:
    """Write the snapshot's index; `base`: the previous snapshot's index and the paths changed
    since, when the same files are listed (then only those paths' rows are written)."""
    sha_of = {e.path: e.sha for e in plan.files if e.path not in failed}
    size_of = {e.path: e.size for e in plan.files}
    if base is not None and not pending and len(listed) <= settings.symbols_max_files:
        changed, shown = base[1], set(listed)
        rows, skipped = _index_rows(
            [p for p in changed if p in sha_of and p in shown], sha_of, size_of, units, settings
        )
        if update_index(base[0], destination, store.db_path, changed, rows, skipped):
            return
    paths = [p for p in listed if p in sha_of]
    rows, skipped = _index_rows(paths[: settings.symbols_max_files], sha_of, size_of, units, settings)
    write_index(destination, store.db_path, rows, len(paths) > settings.symbols_max_files, skipped, pending)


def _index_rows(
    paths: list[str],
    sha_of: dict[str, str],
    size_of: dict[str, int],
    units: dict[tuple[str, str], int],
    settings: Settings,
) -> tuple[list[IndexedFile], list[SkippedFile]]:
    rows, skipped = [], []
    too_large = f"larger than symbols_max_file_bytes ({human_bytes(settings.symbols_max_file_bytes)})"
    for path in paths:
        grammar = grammar_of(path)
        if grammar and size_of[path] > settings.symbols_max_file_bytes:
            skipped.append(SkippedFile(path, GRAMMARS[grammar].name, too_large))
            continue
        unit = units.get((sha_of[path], grammar)) if grammar else None
        if grammar and unit is not None:
            rows.append(IndexedFile(path, unit, GRAMMARS[grammar].name, GRAMMARS[grammar].family))
    return rows, skipped


@dataclass
class _Listing:
    entries: list[TreeEntry]
    record: BuildRecord | None  # the previous build's, when it applies
    changed: set[str]  # paths changed since that build's commit (empty without a record)
    added: set[str]


def _listing(settings: Settings, git_dir: Path, sha: str, previous: Path | None, key: str) -> _Listing:
    """The commit's entries: from the previous build's record and `git diff-tree` when there is
    one of the same key, else from `git ls-tree` of the whole commit."""
    timeout = settings.git_timeout_seconds
    record = load_record(previous, key) if previous is not None else None
    if record is not None:
        try:
            change = changed_tree(git_dir, record.commit, sha, record.entries, timeout)
            return _Listing(change.entries, record, change.changed, change.added)
        except (OSError, ValueError, KeyError, subprocess.SubprocessError) as exc:
            log.warning(
                "listing the changes since %s failed (%s); listing the whole commit", record.commit, exc
            )
    return _Listing(list_tree(git_dir, sha, timeout), None, set(), set())


def _link_targets(git_dir: Path, plan: Plan, listing: _Listing, timeout: float) -> dict[str, str]:
    """Each kept link's target: the record's for links that did not change, else read from git."""
    old = listing.record.targets if listing.record is not None else {}
    changed = listing.changed
    unknown = [e for e in plan.links if e.path in changed or e.path not in old]
    read = read_small_blobs(git_dir, sorted({e.sha for e in unknown}), timeout)
    targets = {e.path: old[e.path] for e in plan.links if e.path not in changed and e.path in old}
    targets.update({e.path: os.fsdecode(read.get(e.sha, b"")) for e in unknown})
    return targets


def build_snapshot(
    settings: Settings,
    git_dir: Path,
    sha: str,
    root: Path,
    index: Path,
    name: str,
    report: Progress,
    secret: Mapping[str, str] | None = None,
    blob_list: Path | None = None,
    previous: Path | None = None,
    move: MoveFrom | None = None,
    parse_later_over: int | None = None,
) -> SnapshotMeta:
    """Build the snapshot of commit `sha` into the empty folder `root`, and its index at `index`.

    `secret` is the lineage verdict of the history the mirror holds (worker/repos/lineage.py);
    without it the history of `sha` is scanned here. Raises SnapshotRefused (a cap), DiskFull,
    or OSError (git or the file system). `blob_list` gets the store objects it links, so that
    removing the snapshot later frees exactly those (blob_gc.collect_released). `previous`:
    the build record of the snapshot this one replaces (worker/repos/build_record.py), whose
    decisions are reused for the paths that did not change; `move`: take the previous snapshot's
    unchanged folders instead of linking their files (worker/repos/materialize.py);
    `parse_later_over`: with more files than this to parse, the snapshot is built without their
    symbols (its index says how many are pending) and worker/repos/deferred_index.py parses them
    once it serves: a first sync can be read and searched before its code is indexed."""
    store = BlobStore(settings.data_dir.resolve())
    key = record_key(settings, store.generation, SNAPSHOT_FORMAT)
    listing = _listing(settings, git_dir, sha, previous, key)
    check_caps(listing.entries, settings, name)
    if secret is None:
        try:
            secret = lineage.scan(git_dir, sha, "all", settings.git_timeout_seconds, settings).verdict
        except GitReadError as exc:
            raise OSError(f"listing the secret files in the history failed: {exc}") from None
    record = listing.record
    plan = make_plan(listing.entries, settings, secret, record.by_name if record else None, listing.changed)
    # Every path whose entry differs from the previous snapshot's: changed in git, or withheld,
    # kept as a link or written differently by the previous build.
    targets = _link_targets(git_dir, plan, listing, settings.git_timeout_seconds)
    hide_secret_links(plan, targets, settings)
    sizes = stored_sizes(plan, settings)
    with store.in_use():
        db = store.connect()
        try:
            infos, units, pending = _process(
                store,
                db,
                git_dir,
                plan,
                sizes,
                record,
                name,
                len(listing.entries),
                report,
                settings,
                parse_later_over,
            )
            report("linking files", 0.98)
            if blob_list is not None:
                blob_list.write_text("\n".join(store.linked_names(sorted(sizes))))
            withheld = frozenset(e.path for e, _ in plan.withheld)
            links = frozenset(e.path for e in plan.links)
            dirty = set(listing.changed)
            if record is not None:
                dirty |= (withheld ^ record.withheld) | (links ^ record.links) | record.failed
            if move is not None and record is not None:
                move.changed = dirty
                failed = materialize(root, plan, targets, store, settings, move)
            else:
                failed = materialize(root, plan, targets, store, settings)
            listed = _indexable(root, settings, record if not listing.added else None, dirty)
            base = None
            if record is not None and previous is not None and listed is record.indexable and not failed:
                base = (previous.with_suffix(INDEX_SUFFIX), dirty)
            write_snapshot_index(listed, plan, failed, units, index, store, settings, pending, base)
            write_manifest(index.with_suffix(MANIFEST_SUFFIX), _manifest_entries(plan, failed))
        finally:
            db.close()
    save_record(
        record_path(index),
        BuildRecord(
            key, sha, listing.entries, plan.by_name, targets,
            {s: (i.kind, i.reason, i.lines) for s, i in infos.items() if s in sizes},
            units, listed, withheld, links, frozenset(failed),
        ),
    )  # fmt: skip
    return _describe(plan, infos, failed, settings)


def _process(
    store: BlobStore,
    db: Any,
    git_dir: Path,
    plan: Plan,
    sizes: dict[str, int],
    record: BuildRecord | None,
    name: str,
    entries: int,
    report: Progress,
    settings: Settings,
    parse_later_over: int | None = None,
) -> tuple[dict[str, BlobInfo], dict[tuple[str, str], int], int]:
    """Process the blobs and parse the (blob, grammar) pairs the store lacks; what the store then
    says of every blob, and the unit of every pair. What the previous build's record knew is
    taken from it (its snapshot still links those objects, so the store still has them)."""
    reused = {s: BlobInfo(*record.infos[s]) for s in sizes if s in record.infos} if record else {}
    infos = {**reused, **store.known(db, [s for s in sizes if s not in reused])}
    missing = [sha for sha in sizes if sha not in infos]
    needed = sum(sizes[s] for s in missing) + _PER_FILE_BYTES * entries
    check_room(store.root, needed, settings.disk_reserve_bytes, f"make the snapshot of {name}")
    wanted = parse_pairs(plan, sizes, settings)
    known_units = {pair: record.units[pair] for pair in wanted if pair in record.units} if record else {}
    parsed = {**known_units, **store.units(db, wanted - set(known_units))}
    grammars: dict[str, set[str]] = {}
    for blob, grammar in wanted - set(parsed):
        grammars.setdefault(blob, set()).add(grammar)
    pending = sum(len(g) for g in grammars.values())
    if parse_later_over is not None and pending > parse_later_over:
        tasks = [Task("process", s) for s in missing]  # redact and store now, parse once it serves
    else:
        pending = 0
        tasks = [Task("process", s, tuple(sorted(grammars.pop(s, ())))) for s in missing]
        tasks += [Task("parse", s, tuple(sorted(g))) for s, g in grammars.items() if infos[s].kind == TEXT]
    if tasks:
        report(f"processing {len(missing):,} new files", 0.85)
        processing = Processing(store, db, sizes, infos, report, len(tasks), settings)
        # IMMEDIATE: take the write lock now (waiting for another build's commit if need be),
        # never upgrade from a read later, which WAL may refuse without waiting.
        db.execute("BEGIN IMMEDIATE")
        try:
            run_tasks(git_dir, store.objects, tasks, pool_limits(settings), processing)
        finally:
            db.execute("COMMIT")
        parsed.update(store.units(db, wanted - set(parsed)))
    return infos, parsed, pending


def pool_limits(settings: Settings) -> PoolLimits:
    return PoolLimits(
        workers=settings.blob_workers or os.cpu_count() or 1,
        timeout_seconds=settings.blob_timeout_seconds,
        memory_bytes=settings.blob_memory_bytes,
        parse_max_bytes=settings.symbols_max_file_bytes,
    )


__all__ = ["DiskFull", "SnapshotRefused", "TreeEntry", "build_snapshot", "check_caps", "list_tree"]
