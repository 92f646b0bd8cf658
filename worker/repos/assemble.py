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

import errno
import logging
import os
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.settings import Settings
from worker.repos import lineage
from worker.repos.blob_pool import PoolLimits, Task, run_tasks
from worker.repos.blob_worker import object_file
from worker.repos.blobstore import BlobInfo, BlobStore
from worker.repos.disk import DiskFull, check_room, free_bytes, human_bytes
from worker.repos.git_read import GitReadError
from worker.repos.lineage import reason_of
from worker.repos.manifest import FILE, LINK, MANIFEST_SUFFIX, ManifestEntry, write_manifest
from worker.repos.placeholders import OVERSIZED, TEXT, WITHHELD, placeholder
from worker.repos.snapshot import LANGUAGES_BY_SUFFIX, README_NAMES, SnapshotMeta
from worker.repos.symbol_grammars import GRAMMARS, grammar_of
from worker.repos.symbols import IndexedFile, SkippedFile, indexable_files, write_index
from worker.repos.visible import is_git_dir, secret_path, shown_name

log = logging.getLogger(__name__)

Progress = Callable[[str, float | None], None]
SYMLINK, GITLINK = "120000", "160000"
_PER_FILE_BYTES = 512  # directory entry, inode and index row: what a file costs beyond its content
_MAX_LINK_HOPS = 40  # as the kernel's ELOOP limit
_COMMIT_EVERY = 300  # store rows written per transaction while processing


class SnapshotRefused(Exception):
    """A commit that may not become a snapshot (over a cap, no disk space); the message says why."""


@dataclass(frozen=True)
class TreeEntry:
    path: str  # relative, "/"-separated; undecodable bytes kept as surrogates (os.fsdecode)
    mode: str  # 100644, 100755, 120000 (symlink) or 160000 (submodule)
    sha: str
    size: int  # bytes; 0 for a submodule


@dataclass
class _Plan:
    files: list[TreeEntry] = field(default_factory=list)
    links: list[TreeEntry] = field(default_factory=list)
    submodules: list[TreeEntry] = field(default_factory=list)
    withheld: list[tuple[TreeEntry, str]] = field(default_factory=list)  # secret by lineage, and why
    hidden: int = 0  # secret names (and links to them): never materialized
    skipped: int = 0  # paths git should never have stored


def _git(git_dir: Path, args: list[str], timeout: float, stdin: bytes | None = None) -> bytes:
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise OSError(f"git {args[0]} failed: {reason[-1] if reason else 'no message'}")
    return done.stdout


def list_tree(git_dir: Path, sha: str, timeout: float) -> list[TreeEntry]:
    """Every file, symlink and submodule of the commit, with sizes, before anything is read."""
    out = _git(git_dir, ["ls-tree", "-r", "-l", "-z", "--full-tree", sha], timeout)
    entries = []
    for record in out.split(b"\0"):
        if not record:
            continue
        head, _, raw_path = record.partition(b"\t")
        mode, _kind, obj, size = head.split()
        entries.append(
            TreeEntry(os.fsdecode(raw_path), mode.decode(), obj.decode(), int(size) if size.isdigit() else 0)
        )
    return entries


def read_small_blobs(git_dir: Path, shas: list[str], timeout: float) -> dict[str, bytes]:
    """The content of a few small blobs (symlink targets), in one `git cat-file --batch`."""
    if not shas:
        return {}
    out = _git(git_dir, ["cat-file", "--batch"], timeout, stdin="".join(f"{s}\n" for s in shas).encode())
    found: dict[str, bytes] = {}
    at = 0
    for sha in shas:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        at = end + 1
        if len(header) == 3:
            size = int(header[2])
            found[sha] = out[at : at + size]
            at += size + 1
    return found


def _valid(path: str) -> bool:
    parts = path.split("/")
    return all(part not in ("", ".", "..") and not is_git_dir(part) for part in parts)


def _plan(entries: list[TreeEntry], settings: Settings, secret: Mapping[str, str]) -> _Plan:
    plan = _Plan()
    for entry in entries:
        if not _valid(entry.path):
            plan.skipped += 1
            log.warning("skipped an entry git should never store: %r", shown_name(entry.path))
        elif secret_path(entry.path, settings) is not None:
            plan.hidden += 1
        elif entry.mode not in (SYMLINK, GITLINK) and (why := reason_of(secret, entry.sha)) is not None:
            plan.withheld.append((entry, why))  # a placeholder: never processed, parsed or linked
        elif entry.mode == SYMLINK:
            plan.links.append(entry)
        elif entry.mode == GITLINK:
            plan.submodules.append(entry)
        else:
            plan.files.append(entry)
    return plan


def check_caps(entries: list[TreeEntry], settings: Settings, name: str) -> None:
    files = len(entries)
    size = sum(entry.size for entry in entries if entry.mode != GITLINK)
    if files > settings.snapshot_max_files:
        raise SnapshotRefused(
            f"the commit of {name} has {files:,} files, more than snapshot_max_files "
            f"({settings.snapshot_max_files:,}; CODEBOT_SNAPSHOT_MAX_FILES); the last good snapshot keeps serving"
        )
    if size > settings.snapshot_max_bytes:
        raise SnapshotRefused(
            f"the commit of {name} holds {human_bytes(size)} in {files:,} files, more than snapshot_max_bytes "
            f"({human_bytes(settings.snapshot_max_bytes)}; CODEBOT_SNAPSHOT_MAX_BYTES); the last good snapshot "
            "keeps serving"
        )


def _resolve(path: str, targets: dict[str, str], depth: int = 0) -> list[str] | None:
    """Where the link at `path` leads inside the tree (its parts), following links on the way;
    None when it leaves the tree, is absolute or loops."""
    target = targets[path]
    if target.startswith("/") or depth > _MAX_LINK_HOPS:
        return None
    parts = path.split("/")[:-1]
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
            continue
        parts.append(part)
        if (joined := "/".join(parts)) in targets:
            resolved = _resolve(joined, targets, depth + 1)
            if resolved is None:
                return None
            parts = resolved
    return parts


def _hide_secret_links(plan: _Plan, targets: dict[str, str], settings: Settings) -> None:
    """Leave out every link whose target names a secret file, or leads to one inside the tree:
    `list_files` would show the name, and the file behind it is not readable anyway."""
    kept = []
    for link in plan.links:
        target = targets.get(link.path, "")
        named = [part for part in target.split("/") if part not in ("", ".", "..")]
        resolved = _resolve(link.path, targets)
        secret = any(secret_path(part, settings) for part in named) or (
            resolved is not None and resolved and secret_path("/".join(resolved), settings) is not None
        )
        if secret:
            plan.hidden += 1
        else:
            kept.append(link)
    plan.links = kept


@dataclass
class _Processing:
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


def _link(source: str, destination: str) -> None:
    try:
        os.link(source, destination)
    except OSError as exc:
        if exc.errno not in (errno.EMLINK, errno.EXDEV, errno.EPERM, errno.ENOTSUP):
            raise
        shutil.copyfile(source, destination)  # too many links, or a file system without them


def _materialize(
    root: Path, plan: _Plan, targets: dict[str, str], store: BlobStore, settings: Settings
) -> set[str]:
    """Write the tree into `root`; the paths of files that could not be written."""
    failed: set[str] = set()
    # Plain strings, not Path objects: per file, pathlib's joins cost as much as the link itself.
    base, objects = os.fspath(root), os.fspath(store.objects)
    written = (*plan.files, *(entry for entry, _ in plan.withheld), *plan.links)
    folders = sorted({p.rsplit("/", 1)[0] for e in written if "/" in (p := e.path)})
    folders += [e.path for e in plan.submodules]
    for folder in folders:
        try:
            os.makedirs(f"{base}/{folder}", exist_ok=True)
        except OSError as exc:
            log.warning("could not make folder %r: %s", shown_name(folder), exc)
    for entry in plan.files:
        destination = f"{base}/{entry.path}"
        try:
            if entry.size == 0:
                os.close(os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            elif entry.size > settings.blob_max_bytes:
                reason = f"larger than blob_max_bytes ({human_bytes(settings.blob_max_bytes)})"
                Path(destination).write_bytes(placeholder(OVERSIZED, entry.size, reason))
            else:
                _link(object_file(objects, entry.sha), destination)
        except OSError as exc:
            failed.add(entry.path)
            log.warning("could not write %r: %s", shown_name(entry.path), exc)
    for entry, why in plan.withheld:
        try:
            Path(f"{base}/{entry.path}").write_bytes(placeholder(WITHHELD, entry.size, why))
        except OSError as exc:
            failed.add(entry.path)
            log.warning("could not write %r: %s", shown_name(entry.path), exc)
    for entry in plan.links:  # last: no link can redirect where a file above was written
        try:
            os.symlink(targets.get(entry.path, ""), f"{base}/{entry.path}")
        except OSError as exc:
            failed.add(entry.path)
            log.warning("could not make link %r: %s", shown_name(entry.path), exc)
    return failed


def _describe(plan: _Plan, infos: dict[str, BlobInfo], failed: set[str], settings: Settings) -> SnapshotMeta:
    files = [e for e in plan.files if e.path not in failed]
    lineage_withheld = [e for e, _ in plan.withheld if e.path not in failed]
    links = [e for e in plan.links if e.path not in failed]
    languages: Counter[str] = Counter()
    for entry in (*files, *lineage_withheld, *links):
        name = entry.path.rsplit("/", 1)[-1]
        language = LANGUAGES_BY_SUFFIX.get(os.path.splitext(name)[1].lower())
        if language:
            languages[language] += 1
    shown = (*files, *lineage_withheld, *links)
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


def _manifest_entries(plan: _Plan, failed: set[str]) -> list[ManifestEntry]:
    """What the snapshot shows, for tools to look up instead of walking (worker/repos/manifest.py)."""
    files = [ManifestEntry(e.path, FILE, e.size) for e in plan.files if e.path not in failed]
    files += [ManifestEntry(e.path, FILE, e.size) for e, _ in plan.withheld if e.path not in failed]
    return files + [ManifestEntry(e.path, LINK, 0) for e in plan.links if e.path not in failed]


def _index(
    root: Path,
    plan: _Plan,
    failed: set[str],
    units: dict[tuple[str, str], int],
    destination: Path,
    store: BlobStore,
    settings: Settings,
) -> None:
    sha_of = {e.path: e.sha for e in plan.files if e.path not in failed}
    size_of = {e.path: e.size for e in plan.files}
    paths = [p for p in indexable_files(root, settings) if p in sha_of]
    partial = len(paths) > settings.symbols_max_files
    rows, skipped = [], []
    too_large = f"larger than symbols_max_file_bytes ({human_bytes(settings.symbols_max_file_bytes)})"
    for path in paths[: settings.symbols_max_files]:
        grammar = grammar_of(path)
        if grammar and size_of[path] > settings.symbols_max_file_bytes:
            skipped.append(SkippedFile(path, GRAMMARS[grammar].name, too_large))
            continue
        unit = units.get((sha_of[path], grammar)) if grammar else None
        if grammar and unit is not None:
            rows.append(IndexedFile(path, unit, GRAMMARS[grammar].name, GRAMMARS[grammar].family))
    write_index(destination, store.db_path, rows, partial, skipped)


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
) -> SnapshotMeta:
    """Build the snapshot of commit `sha` into the empty folder `root`, and its index at `index`.

    `secret` is the lineage verdict of the history the mirror holds (worker/repos/lineage.py);
    without it the history of `sha` is scanned here. Raises SnapshotRefused (a cap), DiskFull,
    or OSError (git or the file system). `blob_list` gets the store objects it links, so that
    removing the snapshot later frees exactly those (BlobStore.collect_released)."""
    entries = list_tree(git_dir, sha, settings.git_timeout_seconds)
    check_caps(entries, settings, name)
    if secret is None:
        try:
            secret = lineage.scan(git_dir, sha, "all", settings.git_timeout_seconds, settings).verdict
        except GitReadError as exc:
            raise OSError(f"listing the secret files in the history failed: {exc}") from None
    plan = _plan(entries, settings, secret)
    targets_by_sha = read_small_blobs(
        git_dir, sorted({e.sha for e in plan.links}), settings.git_timeout_seconds
    )
    targets = {e.path: os.fsdecode(targets_by_sha.get(e.sha, b"")) for e in plan.links}
    _hide_secret_links(plan, targets, settings)
    store = BlobStore(settings.data_dir.resolve())
    sizes = {e.sha: e.size for e in plan.files if 0 < e.size <= settings.blob_max_bytes}
    with store.in_use():
        db = store.connect()
        try:
            infos = store.known(db, sizes)
            missing = [sha for sha in sizes if sha not in infos]
            needed = sum(sizes[s] for s in missing) + _PER_FILE_BYTES * len(entries)
            check_room(store.root, needed, settings.disk_reserve_bytes, f"make the snapshot of {name}")
            wanted = {
                (e.sha, g)
                for e in plan.files
                if e.sha in sizes and e.size <= settings.symbols_max_file_bytes and (g := grammar_of(e.path))
            }
            parsed = store.units(db, wanted)
            grammars: dict[str, set[str]] = {}
            for blob, grammar in wanted - set(parsed):
                grammars.setdefault(blob, set()).add(grammar)
            tasks = [Task("process", s, tuple(sorted(grammars.pop(s, ())))) for s in missing]
            tasks += [
                Task("parse", s, tuple(sorted(g))) for s, g in grammars.items() if infos[s].kind == TEXT
            ]
            if tasks:
                report(f"processing {len(missing):,} new files", 0.85)
                processing = _Processing(store, db, sizes, infos, report, len(tasks), settings)
                # IMMEDIATE: take the write lock now (waiting for another build's commit if need
                # be), never upgrade from a read later, which WAL may refuse without waiting.
                db.execute("BEGIN IMMEDIATE")
                try:
                    run_tasks(git_dir, store.objects, tasks, _limits(settings), processing)
                finally:
                    db.execute("COMMIT")
            report("linking files", 0.98)
            if blob_list is not None:
                blob_list.write_text("\n".join(store.linked_names(sorted(sizes))))
            failed = _materialize(root, plan, targets, store, settings)
            _index(root, plan, failed, store.units(db, wanted), index, store, settings)
            write_manifest(index.with_suffix(MANIFEST_SUFFIX), _manifest_entries(plan, failed))
        finally:
            db.close()
    return _describe(plan, infos, failed, settings)


def _limits(settings: Settings) -> PoolLimits:
    return PoolLimits(
        workers=settings.blob_workers or os.cpu_count() or 1,
        timeout_seconds=settings.blob_timeout_seconds,
        memory_bytes=settings.blob_memory_bytes,
        parse_max_bytes=settings.symbols_max_file_bytes,
    )


__all__ = ["DiskFull", "SnapshotRefused", "TreeEntry", "build_snapshot", "check_caps", "list_tree"]
