"""Mirrors of the whitelisted repos and the immutable snapshots that questions read.

Layout under `<data_dir>/repos/<name>/`:

    mirror.git/             bare repo: the branch's last `history_depth` commits and the tags
                            among them (the history tools read it); the RepoSpec's url is
                            never written into its config
    lineage.git/            when the `history_depth` window cuts the branch (mirror.git/shallow):
                            the whole branch without blobs (commits and trees), read only to know
                            which blobs were secret files before the window's edge
                            (worker/repos/lineage.py); a mirror that reaches the first commit is
                            its own lineage and keeps none
    snapshots/<sha>/        the commit's files as processed blobs (worker.repos.assemble), never modified
    snapshots/<sha>.json    the snapshot's metadata (worker.repos.snapshot.write_meta)
    snapshots/<sha>.lock    lease file: a question holds LOCK_SH on it while it reads the snapshot
    manifests/<sha>.sqlite  the snapshot's symbol index (worker.repos.symbols), removed after its snapshot
    current -> snapshots/<sha>   swapped atomically (temp symlink, then rename over)
    state.json              last attempt, last error, branch resolved, history depth fetched
    refresh.lock            LOCK_EX for a whole sync: one refresh of a repo at a time

Snapshot files are hardlinks into the host-wide processed blob store, `<data_dir>/blobs/`
(worker.repos.blobstore): a blob is processed (classified, redacted, parsed) once for every
repo and commit on the host, so a refresh costs what changed. A snapshot made before the store
existed (a raw `git archive`, format 1) is never served: the next sync rebuilds it.

A refresh never touches a snapshot a question may hold: it builds the new commit beside the
old ones, swaps `current`, and GC removes an old snapshot only when it can take LOCK_EX on its
lease file, i.e. when no question holds it. GC runs under the refresh lock and only a refresh
moves `current`, so GC never races a swap.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import IO

from config.repos import RepoSpec, Whitelist
from config.settings import Settings
from worker.repos.assemble import SnapshotRefused, build_snapshot
from worker.repos.build_record import record_path
from worker.repos.cleanup import Cleanup, run_now
from worker.repos.deferred_index import PARSE_LATER_OVER, finish_index
from worker.repos.disk import DiskFull
from worker.repos.locks import LockTimeout, SnapshotFolder, TakeApart, exclusive_lock
from worker.repos.materialize import MoveFrom
from worker.repos.mirror_git import GitError, Progress, history_depth, run_mirror_git, scrub
from worker.repos.mirror_lineage import MirrorGit
from worker.repos.mirror_state import UNKNOWN, RepoPaths, current_sha, read_state, shorter_than, write_state
from worker.repos.mirror_upkeep import MirrorUpkeep
from worker.repos.search_index.build import IndexBase, index_after_serving
from worker.repos.snapshot import SNAPSHOT_FORMAT, Snapshot, meta_format, read_meta, write_meta
from worker.repos.spare import Previous
from worker.repos.symbol_index_write import index_pending
from worker.repos.symbols import index_path
from worker.repos.sync_errors import BUSY, error_kind

log = logging.getLogger(__name__)

_SNAPSHOT_START = 0.85  # of the progress bar; the fetch's phases (worker/repos/mirror_git.py) take the rest


class UnknownRepoError(ValueError):
    """A name that is not in the whitelist (callers check names first, so this is a bug)."""


@dataclass(frozen=True)
class SyncResult:
    name: str
    ok: bool
    sha: str | None  # the snapshot served now: the new one, or the last good one on failure
    changed: bool  # `current` now points at a different commit than before
    error: str | None
    waited: bool  # another refresh of this repo was running, and this one waited for it
    error_kind: str = ""  # on failure, one word of worker/repos/sync_errors.py: timeout, git, disk…
    seconds: float = 0.0  # how long the sync took, its wait for another refresh included


@dataclass(frozen=True)
class RepoStatus:
    name: str
    branch: str | None
    sha: str | None
    created_at: float | None
    committed_at: float | None
    size_bytes: int | None
    last_error: str | None
    last_attempt_at: float | None
    display_url: str


class Mirrors(MirrorUpkeep):
    def __init__(
        self, settings: Settings, whitelist: Whitelist, cleaner: Callable[[Cleanup], None] = run_now
    ) -> None:
        self.settings = settings
        self.whitelist = whitelist
        # What runs an old snapshot's deletion and the blob collection after a sync:
        # run_now (the sync waits) or a BackgroundCleaner (workers: the refresh returns first).
        self.cleaner = cleaner
        # Absolute and canonical, so snapshot roots stay valid whatever the cwd and compare
        # cleanly with resolved paths (the tools check that reads stay inside a snapshot).
        self.root = settings.data_dir.resolve() / "repos"

    # --- public API ------------------------------------------------------------------------

    def sync(self, name: str, progress: Progress | None = None) -> SyncResult:
        """Clone or fetch `name` and serve its newest commit; git failures never raise."""
        started = time.monotonic()
        result = self._sync(name, progress)
        return replace(result, seconds=round(time.monotonic() - started, 3))

    def _sync(self, name: str, progress: Progress | None) -> SyncResult:
        spec, paths = self._spec(name), RepoPaths(self.root / name)
        paths.snapshots.path.mkdir(parents=True, exist_ok=True)
        report = progress or (lambda message, fraction: None)
        wait_seconds = self.settings.sync_lock_wait_seconds
        try:
            with exclusive_lock(
                paths.refresh_lock, wait_seconds, on_wait=lambda: report("waiting for another refresh", None)
            ) as waited:
                state = read_state(paths)
                state["last_attempt_at"] = time.time()
                try:
                    git = MirrorGit(spec, paths.root, self.root, self.settings)
                    before = git.branch_tip(state.get("branch") or spec.branch)
                    branch = git.fetch(report)
                    state["branch"] = branch
                    sha = self._git(spec, paths, ["rev-parse", "--verify", f"refs/heads/{branch}^{{commit}}"])
                    rewritten = bool(before) and before != sha and not git.is_ancestor(before or "", sha)
                    if rewritten:
                        git.prune("a non-fast-forward (force push) of the branch")
                    secret = git.secret_blobs(sha, branch, report, rewritten)
                    changed, base = self._serve(spec, paths, sha, branch, report, secret)
                    index = index_path(paths.snapshots.files(sha))
                    if index_pending(index):  # a first sync's code, parsed once it serves
                        finish_index(self.settings, paths.mirror, index, report)
                    index_after_serving(self.settings, name, paths.snapshots.files(sha), base)
                except (GitError, OSError, ValueError, SnapshotRefused, DiskFull) as exc:
                    error = scrub(str(exc), spec)
                    log.warning("sync of %s failed: %s", name, error)
                    write_state(paths, {**state, "last_error": error})
                    kind = error_kind(exc)
                    return SyncResult(name, False, current_sha(paths), False, error, waited, kind)
                depth = history_depth(spec, self.settings)
                if shorter_than(depth, state.get("history_depth", UNKNOWN)):
                    git.prune("a shorter history_depth")
                state["history_depth"] = depth
                write_state(paths, {**state, "last_error": None, "last_ok_at": time.time()})
                self._collect(paths)
                self._keep_a_spare(paths, sha)
                git.maintain()
                if git.window_needs_repack():
                    self._repack_window(paths, git)
                report("done" if changed else "up to date", 1.0)
                return SyncResult(name, True, sha, changed, None, waited)
        except LockTimeout:
            error = f"another refresh of {name} is still running after {wait_seconds:g} s; gave up waiting"
            return SyncResult(name, False, current_sha(paths), False, error, True, BUSY)

    def current(self, name: str) -> Snapshot | None:
        """The snapshot served now, unleased: for listings, not for reading its files."""
        spec, paths = self._spec(name), RepoPaths(self.root / name)
        sha = current_sha(paths)
        if sha is None or not self._servable(paths, sha):
            return None
        try:
            return read_meta(paths.snapshots.meta(sha), spec, paths.snapshots.files(sha), paths.mirror)
        except (OSError, ValueError, KeyError):
            return None

    @contextmanager
    def lease(self, names: Iterable[str]) -> Iterator[dict[str, Snapshot]]:
        """Pin the current snapshot of each repo until the block exits (or the process dies)."""
        with ExitStack() as held:
            snapshots: dict[str, Snapshot] = {}
            for name in dict.fromkeys(names):
                spec, paths = self._spec(name), RepoPaths(self.root / name)
                leased = paths.snapshots.lease(partial(current_sha, paths))
                if leased is None:
                    continue  # never synced (or being built for the first time)
                fd, sha = leased
                held.callback(os.close, fd)
                if not self._servable(paths, sha):
                    continue  # made before the blob store (not redacted): the next sync rebuilds it
                try:
                    snapshots[name] = read_meta(
                        paths.snapshots.meta(sha), spec, paths.snapshots.files(sha), paths.mirror
                    )
                except (OSError, ValueError, KeyError) as exc:
                    log.warning("snapshot %s of %s is unreadable: %s", sha, name, exc)
            yield snapshots

    def status(self) -> list[RepoStatus]:
        return [self.status_of(spec.name) for spec in self.whitelist.repos]

    def status_of(self, name: str) -> RepoStatus:
        spec = self._spec(name)
        snap = self.current(name)
        state = read_state(RepoPaths(self.root / name))
        return RepoStatus(
            name=name,
            branch=snap.branch if snap else state.get("branch") or spec.branch,
            sha=snap.sha if snap else None,
            created_at=snap.created_at if snap else None,
            committed_at=snap.committed_at if snap else None,
            size_bytes=snap.meta.size_bytes if snap else None,
            last_error=state.get("last_error"),
            last_attempt_at=state.get("last_attempt_at"),
            display_url=spec.display_url,
        )

    def gc(self, name: str) -> list[str]:
        """Remove the snapshots of `name` that are neither current nor leased; their shas."""
        self._spec(name)
        paths = RepoPaths(self.root / name)
        if not paths.snapshots.path.is_dir():
            return []
        try:
            with exclusive_lock(paths.refresh_lock, self.settings.sync_lock_wait_seconds):
                removed = self._gc_locked(paths)
        except LockTimeout:
            return []
        if removed:
            self._empty_trash_and_collect(paths)
        return removed

    # --- git -------------------------------------------------------------------------------

    def _git(
        self,
        spec: RepoSpec,
        paths: RepoPaths,
        args: list[str],
        report: Progress | None = None,
        stdout: IO[bytes] | None = None,
        watch_disk: bool = False,
    ) -> str:
        """Run git on the mirror: its stdout, or GitError with its complaint (scrubbed)."""
        reserve = self.settings.disk_reserve_bytes if watch_disk else 0
        return run_mirror_git(
            spec, paths.mirror, args, self.settings.git_timeout_seconds, self.root, reserve, report, stdout
        )

    # --- snapshots -------------------------------------------------------------------------

    def _servable(self, paths: RepoPaths, sha: str) -> bool:
        """A complete snapshot made from processed blobs (an older raw one is never served)."""
        return (
            paths.snapshots.files(sha).is_dir() and meta_format(paths.snapshots.meta(sha)) == SNAPSHOT_FORMAT
        )

    def _serve(
        self,
        spec: RepoSpec,
        paths: RepoPaths,
        sha: str,
        branch: str,
        report: Progress,
        secret: dict[str, str],
    ) -> tuple[bool, IndexBase | None]:
        """Make `sha` the current snapshot, building it if needed; True if `current` moved, and
        what its search index may copy from the snapshot it replaces."""
        complete = paths.snapshots.is_complete(sha) and self._servable(paths, sha)
        if current_sha(paths) == sha and complete:
            return False, None
        taken: Previous | None = None
        base: IndexBase | None = None
        if not complete:
            report("making snapshot", _SNAPSHOT_START)
            taken, base = self._build(spec, paths, sha, branch, report, secret)
        try:
            link = paths.root / f".current-{os.getpid()}-{threading.get_ident()}"
            link.unlink(missing_ok=True)
            os.symlink(f"snapshots/{sha}", link)
            os.replace(link, paths.current)
        finally:
            if taken is not None:
                taken.retire()  # GC (_collect) removes what is left of it
        return True, base

    def _build(
        self,
        spec: RepoSpec,
        paths: RepoPaths,
        sha: str,
        branch: str,
        report: Progress,
        secret: dict[str, str],
    ) -> tuple[Previous | None, IndexBase | None]:
        """Assemble the commit from processed blobs in a temp dir, record its metadata, then
        rename it into place. Reuses the served snapshot's build record, and takes its unchanged
        folders when no question reads it: then returns it, to be retired once this one serves,
        with the previous snapshot and the paths that differ from it when the record was reused."""
        folder = paths.snapshots
        tmp = folder.path / f".tmp-{sha}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        previous, taken = self._previous(paths, sha)
        move = MoveFrom(taken.claim, taken.release) if taken is not None else None
        try:
            final = folder.files(sha)
            built = build_snapshot(
                self.settings,
                paths.mirror,
                sha,
                tmp,
                index_path(final),
                spec.name,
                report,
                secret,
                blob_list=folder.blob_list(sha),
                previous=previous,
                move=move,
                parse_later_over=PARSE_LATER_OVER,
            )
            committed_at = float(self._git(spec, paths, ["log", "-1", "--format=%ct", sha]))
            snapshot = Snapshot(spec, sha, branch, final, time.time(), committed_at, built.meta)
            write_meta(folder.meta(sha), snapshot)
            folder.lease_file(sha).touch()
            _rename_into_place(folder, sha, tmp)
        except BaseException:
            if move is not None and taken is not None:
                move.undo()  # before the temp dir goes: what it holds was moved from the served one
                taken.release()
            folder.blob_list(sha).unlink(missing_ok=True)  # of a build that never served
            raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        base = None if built.since is None else IndexBase(folder.files(built.since[0]), built.since[1])
        return taken, base

    def _previous(self, paths: RepoPaths, sha: str) -> tuple[Path | None, Previous | None]:
        """The served snapshot's build record (to reuse what its build decided), and the served
        snapshot to take unchanged folders from; none when it is `sha` or not servable."""
        folder = paths.snapshots
        current = current_sha(paths)
        if current is None or current == sha or not self._servable(paths, current):
            return None, None
        return record_path(index_path(folder.files(current))), Previous(
            folder, current, TakeApart(folder, current)
        )

    # --- small helpers ---------------------------------------------------------------------

    def _spec(self, name: str) -> RepoSpec:
        spec = self.whitelist.get(name)
        if spec is None:
            known = ", ".join(self.whitelist.names()) or "none"
            raise UnknownRepoError(f"unknown repo {name!r} — known repos: {known}")
        return spec


def _rename_into_place(folder: SnapshotFolder, sha: str, tmp: Path) -> None:
    """Give the built snapshot its final name. A leftover dir there is incomplete or of the old
    format, so no lease can be holding it (neither is ever served)."""
    final = folder.files(sha)
    if final.exists():
        trash = folder.path / f".trash-{sha}-{os.getpid()}"
        os.rename(final, trash)
        shutil.rmtree(trash, ignore_errors=True)
    os.rename(tmp, final)
