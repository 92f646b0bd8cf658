"""Disk space: the mirrors never eat into the reserve, and a failed fetch leaves nothing behind.

The data dir is often the disk the embedded Redis writes its AOF to: a mirror that fills it
stops Redis (MISCONF) and with it every question. So before a fetch and before a snapshot is
written, the free space is checked against `disk_reserve_bytes`; during a fetch a watchdog
stops git as soon as the free space falls under it; and a failed or stopped fetch has its
partial objects deleted (git leaves `objects/incoming-*`, `tmp_pack_*`, `tmp_obj_*`).
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

RESERVE_VARIABLE = "CODEBOT_DISK_RESERVE_BYTES"
WATCH_INTERVAL_SECONDS = 0.05  # statvfs costs microseconds; a local fetch can fill 100 MB in a second


class DiskFull(Exception):
    """Not enough free space to go on without eating into the reserve; the message says so."""


def human_bytes(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(size) < 1024 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"  # unreachable


def free_bytes(path: Path) -> int:
    """Free space for us on the file system holding `path` (or its nearest existing parent)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def check_room(path: Path, needed: int, reserve: int, what: str) -> None:
    """Raise DiskFull unless `needed` bytes fit on `path`'s disk with `reserve` bytes to spare."""
    free = free_bytes(path)
    if free - needed < reserve:
        raise DiskFull(
            f"not enough disk space to {what}: {human_bytes(free)} free, {human_bytes(needed)} needed "
            f"and {human_bytes(reserve)} kept free for Redis and the system ({RESERVE_VARIABLE})"
        )


class Watchdog:
    """Calls `stop` once if the free space on `path` falls under `reserve` while it runs."""

    def __init__(self, path: Path, reserve: int, stop: Callable[[], None]) -> None:
        self.path, self.reserve, self.stop = path, reserve, stop
        self.tripped: int | None = None  # the free space seen when it stopped the work
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="disk-watchdog", daemon=True)

    def __enter__(self) -> Watchdog:
        if self.reserve > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()

    def _watch(self) -> None:
        while not self._done.wait(WATCH_INTERVAL_SECONDS):
            free = free_bytes(self.path)
            if free < self.reserve:
                self.tripped = free
                self.stop()
                return

    def message(self, what: str) -> str:
        return under_reserve(what, self.tripped or 0, self.reserve)


def under_reserve(what: str, free: int, reserve: int) -> str:
    return (
        f"{what} stopped: the free disk space fell to {human_bytes(free)}, under the {human_bytes(reserve)} "
        f"kept free for Redis and the system ({RESERVE_VARIABLE})"
    )


# What git leaves in a repository when a fetch dies: the quarantine of a receive, packs being
# written, loose objects being written, and the locks a killed process did not release.
_PARTIAL_FETCH_GLOBS = (
    "objects/incoming-*",
    "objects/pack/tmp_*",
    "objects/pack/.tmp-*",
    "objects/*/tmp_obj_*",
    "objects/tmp_objdir-*",
    "shallow.lock",
    "packed-refs.lock",
    "FETCH_HEAD.lock",
    "config.lock",
    "index.lock",
    "refs/**/*.lock",
)


def remove_partial_fetch(git_dir: Path) -> int:
    """Delete what a dead or failed fetch left in a bare repository; how many entries.

    Only safe while no git runs on it: the mirrors call it under the repo's refresh lock."""
    removed = 0
    for pattern in _PARTIAL_FETCH_GLOBS:
        for path in git_dir.glob(pattern):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed += 1
    if removed:
        log.info("removed %d leftover(s) of a failed fetch in %s", removed, git_dir)
    return removed
