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
   pool of bounded processes (worker/repos/snapshot_processing.py); so are the (blob, grammar)
   pairs not parsed yet. A refresh after a two-file commit processes two blobs.
4. The folder is assembled from hardlinks to the processed objects (a copy when a link is
   impossible), empty files, placeholders for oversized files, and the symlinks last (so no
   link can redirect where a file is written). Cost: one directory entry per file.
5. One `rg --files` walk lists what `search` sees of the folder (worker/repos/search_listing.py;
   a refresh that added no path and changed no ignore file reuses the last build's lists). The
   snapshot's symbol index (worker/repos/symbols.py) maps the listed files to their parsed
   units, and its manifest (worker/repos/manifest.py) lists its paths for the tools and the
   files its ignore files hide from `search`.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from config.settings import Settings
from worker.repos import lineage
from worker.repos.blobstore import BlobInfo, BlobStore
from worker.repos.build_record import BuildRecord, load_record, record_key, record_path, save_record
from worker.repos.disk import DiskFull, human_bytes
from worker.repos.git_read import GitReadError
from worker.repos.manifest import FILE, LINK, MANIFEST_SUFFIX, ManifestEntry, read_manifest, write_manifest
from worker.repos.materialize import MoveFrom, materialize
from worker.repos.placeholders import TEXT
from worker.repos.search_listing import SearchListing, searched_listing
from worker.repos.shown_paths import redacted_paths_of, redacted_paths_since
from worker.repos.snapshot import LANGUAGES_BY_SUFFIX, README_NAMES, SNAPSHOT_FORMAT, SnapshotMeta
from worker.repos.snapshot_plan import (
    Plan,
    SnapshotRefused,
    check_caps,
    hide_secret_links,
    make_plan,
    stored_sizes,
)
from worker.repos.snapshot_processing import Progress, process_missing
from worker.repos.symbol_grammars import GRAMMARS, grammar_of
from worker.repos.symbol_index_write import update_index, write_index
from worker.repos.symbols import INDEX_SUFFIX, IndexedFile, SkippedFile
from worker.repos.symbols_index.name_table import forget, list_snapshot
from worker.repos.tree_listing import TreeEntry, changed_tree, list_tree, read_small_blobs
from worker.repos.visible import shown_name

log = logging.getLogger(__name__)


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
    forget(store.db_path, destination)  # never listed as it was while its index changes
    updated = _write_index(listed, plan, failed, units, destination, store, settings, pending, base)
    list_snapshot(store.db_path, destination, base if updated else None)


def _write_index(
    listed: list[str],
    plan: Plan,
    failed: set[str],
    units: dict[tuple[str, str], int],
    destination: Path,
    store: BlobStore,
    settings: Settings,
    pending: int,
    base: tuple[Path, set[str]] | None,
) -> bool:
    """Write the index: True when it is `base` with the changed paths' rows replaced."""
    sha_of = {e.path: e.sha for e in plan.files if e.path not in failed}
    size_of = {e.path: e.size for e in plan.files}
    if base is not None and not pending and len(listed) <= settings.symbols_max_files:
        changed, shown = base[1], set(listed)
        rows, skipped = _index_rows(
            [p for p in changed if p in sha_of and p in shown], sha_of, size_of, units, settings
        )
        if update_index(base[0], destination, store.db_path, changed, rows, skipped):
            return True
    paths = [p for p in listed if p in sha_of]
    rows, skipped = _index_rows(paths[: settings.symbols_max_files], sha_of, size_of, units, settings)
    write_index(destination, store.db_path, rows, len(paths) > settings.symbols_max_files, skipped, pending)
    return False


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


@dataclass(frozen=True)
class Built:
    """A build's outcome: the snapshot's metadata and, when it reused the previous build's
    record, that build's commit and every path whose entry differs from its snapshot's (a
    search index copies the other paths' rows: worker/repos/search_index/build.py)."""

    meta: SnapshotMeta
    since: tuple[str, frozenset[str]] | None = None


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
) -> Built:
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
    decided = _decide(settings, git_dir, sha, name, secret, previous, key)
    listing, plan, targets, sizes = decided.listing, decided.plan, decided.targets, decided.sizes
    with store.in_use():
        db = store.connect()
        try:
            infos, units, pending = process_missing(
                store, db, git_dir, plan, sizes, listing.record, name, len(listing.entries), report, settings,
                parse_later_over,
            )  # fmt: skip
            report("linking files", 0.98)
            if blob_list is not None:
                blob_list.write_text("\n".join(store.linked_names(sorted(sizes))))
            failed, searched, dirty = _link_and_index(
                store, plan, targets, listing, root, index, settings, units, pending, move, previous
            )
        finally:
            db.close()
    save_record(record_path(index), decided.record(infos, units, searched, failed))
    since = (listing.record.commit, frozenset(dirty | failed)) if listing.record is not None else None
    return Built(_describe(plan, infos, failed, settings), since)


@dataclass(frozen=True)
class _Decided:
    """What a build decides before it touches the store: the commit's entries, what becomes of
    each, the links' targets, and the blobs it stores with their sizes."""

    key: str
    sha: str
    listing: _Listing
    plan: Plan
    targets: dict[str, str]
    sizes: dict[str, int]

    def record(
        self,
        infos: dict[str, BlobInfo],
        units: dict[tuple[str, str], int],
        searched: SearchListing,
        failed: set[str],
    ) -> BuildRecord:
        """The build record the next build of this repo reuses (worker/repos/build_record.py)."""
        plan = self.plan
        return BuildRecord(
            self.key, self.sha, self.listing.entries, plan.by_name, self.targets,
            {s: (i.kind, i.reason, i.lines) for s, i in infos.items() if s in self.sizes},
            units, searched.indexable, frozenset(e.path for e, _ in plan.withheld),
            frozenset(e.path for e in plan.links), frozenset(failed), searched.ignored,
        )  # fmt: skip


def _decide(
    settings: Settings,
    git_dir: Path,
    sha: str,
    name: str,
    secret: Mapping[str, str] | None,
    previous: Path | None,
    key: str,
) -> _Decided:
    """List the commit (refused over a cap) and decide every entry: by name, by lineage, the
    links' targets, and what the store keeps."""
    listing = _listing(settings, git_dir, sha, previous, key)
    check_caps(listing.entries, settings, name)
    record = listing.record
    verdict = _verdict(git_dir, sha, secret, settings)
    plan = make_plan(listing.entries, settings, verdict, record.by_name if record else None, listing.changed)
    targets = _link_targets(git_dir, plan, listing, settings.git_timeout_seconds)
    hide_secret_links(plan, targets, settings)
    return _Decided(key, sha, listing, plan, targets, stored_sizes(plan, settings))


def _verdict(
    git_dir: Path, sha: str, secret: Mapping[str, str] | None, settings: Settings
) -> Mapping[str, str]:
    """The lineage verdict given, or that of the history of `sha` (worker/repos/lineage.py)."""
    if secret is not None:
        return secret
    try:
        return lineage.scan(git_dir, sha, "all", settings.git_timeout_seconds, settings).verdict
    except GitReadError as exc:
        raise OSError(f"listing the secret files in the history failed: {exc}") from None


def _link_and_index(
    store: BlobStore,
    plan: Plan,
    targets: dict[str, str],
    listing: _Listing,
    root: Path,
    index: Path,
    settings: Settings,
    units: dict[tuple[str, str], int],
    pending: int,
    move: MoveFrom | None,
    previous: Path | None,
) -> tuple[set[str], SearchListing, set[str]]:
    """Write the snapshot's folder, list what search sees of it (worker/repos/search_listing.py),
    then write its symbol index and its manifest; the paths that could not be written, the
    listing, and the paths whose entry differs from the previous snapshot's."""
    record = listing.record
    # Every path whose entry differs from the previous snapshot's: changed in git, or withheld,
    # kept as a link or written differently by the previous build.
    dirty = set(listing.changed)
    if record is not None:
        withheld = frozenset(e.path for e, _ in plan.withheld)
        links = frozenset(e.path for e in plan.links)
        dirty |= (withheld ^ record.withheld) | (links ^ record.links) | record.failed
    if move is not None and record is not None:
        move.changed = dirty
        failed = materialize(root, plan, targets, store, settings, move)
    else:
        failed = materialize(root, plan, targets, store, settings)
    entries = _manifest_entries(plan, failed)
    files = {e.path for e in entries if e.kind == FILE}
    searched = searched_listing(root, files, settings, record if not listing.added else None, dirty)
    base = None
    if record is not None and previous is not None and searched.indexable is record.indexable and not failed:
        base = (previous.with_suffix(INDEX_SUFFIX), dirty)
    write_snapshot_index(searched.indexable, plan, failed, units, index, store, settings, pending, base)
    redacted = _redacted_paths(entries, previous if record is not None else None, dirty | failed)
    write_manifest(index.with_suffix(MANIFEST_SUFFIX), entries, searched.ignored, redacted)
    return failed, searched, dirty


def _redacted_paths(entries: list[ManifestEntry], previous: Path | None, dirty: set[str]) -> dict[str, str]:
    """The snapshot's paths shown redacted (worker/repos/shown_paths.py): the previous build's
    answer reused, and only the `dirty` paths (those that differ from its snapshot) redacted."""
    before = read_manifest(previous.with_suffix(MANIFEST_SUFFIX)) if previous is not None else None
    if before is None or before.redacted is None:
        return redacted_paths_of(e.path for e in entries)
    return redacted_paths_since([e.path for e in entries], before.redacted, dirty)


__all__ = ["Built", "DiskFull", "SnapshotRefused", "TreeEntry", "build_snapshot", "check_caps", "list_tree"]
