"""The upkeep after a mirror's sync: old snapshots removed once no question leases them, their
processed blobs collected, a spare linked for the next refresh, a windowed mirror's deltas
recomputed. Each runs through the Mirrors' cleaner: at once (`codebot repos sync`) or on a
worker's background thread (worker/repos/cleanup.py), off the refresh's critical path.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable

from config.settings import Settings
from worker.repos import blob_gc
from worker.repos.blobstore import BlobStore
from worker.repos.cleanup import BackgroundCleaner, Cleanup
from worker.repos.locks import LockTimeout, exclusive_lock
from worker.repos.mirror_lineage import MirrorGit
from worker.repos.mirror_state import RepoPaths, current_sha
from worker.repos.spare import build_spare, discard_stale_spares
from worker.repos.symbols import prune_indexes

log = logging.getLogger(__name__)

_REPACK_LOCK_WAIT_SECONDS = 30.0  # a background repack waits this long for the repo's refresh lock


class MirrorUpkeep:
    """The Mirrors' clean-up after a sync, under (or right after) the repo's refresh lock."""

    settings: Settings
    cleaner: Callable[[Cleanup], None]

    def _collect(self, paths: RepoPaths) -> None:
        """GC after a sync; failing to delete is logged, never turned into a failed sync."""
        try:
            removed = self._gc_locked(paths)
        except OSError as exc:
            log.warning("removing old snapshots of %s failed: %s", paths.root.name, exc)
            return
        if removed:
            self.cleaner(lambda: self._empty_trash_and_collect(paths))

    def _keep_a_spare(self, paths: RepoPaths, sha: str) -> None:
        """Discard outdated spares, and have a long-lived process's background cleaner link one
        of the served snapshot for the next refresh (worker/repos/spare.py)."""
        if discard_stale_spares(paths.snapshots, sha):
            self.cleaner(lambda: self._empty_trash_and_collect(paths))
        if isinstance(self.cleaner, BackgroundCleaner):
            self.cleaner(lambda: build_spare(paths.snapshots, sha))

    def _repack_window(self, paths: RepoPaths, git: MirrorGit) -> None:
        """A windowed mirror's deltas recomputed once, off the sync's path: in a long-lived
        process's background cleaner once the sync that queued it let the repo go (a sync still
        holding it after that leaves it to the next); at once, under the caller's lock, for a
        one-off sync (`codebot repos sync`)."""
        if not isinstance(self.cleaner, BackgroundCleaner):
            git.repack_window()
            return

        def repack() -> None:
            try:
                with exclusive_lock(paths.refresh_lock, _REPACK_LOCK_WAIT_SECONDS):  # the sync's end
                    git.repack_window()
            except LockTimeout:
                pass

        self.cleaner(repack)

    def _empty_trash_and_collect(self, paths: RepoPaths) -> None:
        released = paths.snapshots.empty_trash()
        self._collect_blobs(released)

    def _gc_locked(self, paths: RepoPaths) -> list[str]:
        """Remove unleased old snapshots; the caller holds the refresh lock."""
        for leftover in paths.root.glob(".current-*"):
            leftover.unlink(missing_ok=True)  # a swap that died half-way
        current = current_sha(paths)
        removed = paths.snapshots.remove_unleased(keep=current)
        prune_indexes(paths.root, current)  # the indexes of snapshots just removed, old build records
        if removed:
            log.info("removed %d old snapshot(s) of %s", len(removed), paths.root.name)
        return removed

    def _collect_blobs(self, released: set[str] | None = None) -> None:
        """Delete the processed blobs no snapshot of any repo uses any more: of `released` only
        (the objects the removed snapshots linked), or, when that is unknown, of the whole store."""
        store = BlobStore(self.settings.data_dir.resolve())
        try:
            count = blob_gc.collect(store) if released is None else blob_gc.collect_released(store, released)
        except (OSError, sqlite3.Error) as exc:
            log.warning("removing unused processed blobs failed: %s", exc)
            return
        if count:
            log.info("removed %d processed blob(s) no snapshot uses", count)
