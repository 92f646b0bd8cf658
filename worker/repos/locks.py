"""The locking protocol of a repo's snapshots: one refresh at a time, leases, and safe GC.

These are flock(2) locks. They belong to an open file description and disappear when the
holder closes it or dies (even by SIGKILL), so a crashed refresh or question never pins
anything forever. Two opens of the same file conflict even inside one process, so threads
get the same guarantees as processes. The descriptors are close-on-exec, so git and other
children never inherit (and silently prolong) a lock.

A snapshots folder holds, per commit: `<sha>/` (the files), `<sha>.json` (metadata) and
`<sha>.lock` (the lease file). A question holds LOCK_SH on the lease file while it reads;
GC removes a snapshot only when it gets LOCK_EX without waiting, and it deletes the lease
file last, so a reader that locked a file GC then deleted notices and looks again.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_LEASE_ATTEMPTS = 20


def is_sha(text: str) -> bool:
    """A full SHA-1 or SHA-256 object name, as snapshot folders are named."""
    return bool(_SHA.match(text))


class LockTimeout(Exception):
    """Waited longer than allowed for a lock someone else holds."""


def _same_file(fd: int, path: Path) -> bool:
    """Is `path` still the file `fd` has open? (A lock file may be unlinked while we wait.)"""
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)


@contextmanager
def exclusive_lock(
    path: Path, wait_seconds: float, on_wait: Callable[[], None] | None = None
) -> Iterator[bool]:
    """Hold an exclusive lock on `path` (created if missing); yields whether we had to wait.

    Polls rather than blocking so the wait is bounded: a stuck holder is itself bounded by
    the git timeout, and a caller should hear "gave up" rather than hang.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        waited = False
        deadline = time.monotonic() + wait_seconds
        pause = 0.01
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not waited and on_wait is not None:
                    on_wait()
                waited = True
                if time.monotonic() >= deadline:
                    raise LockTimeout(f"{path} is still held after {wait_seconds:g} s") from None
                time.sleep(pause)
                pause = min(pause * 2, 0.5)
        yield waited
    finally:
        os.close(fd)  # releases the lock


def lock_shared_if_present(path: Path) -> int | None:
    """Share-lock an existing lock file and return its descriptor (close it to release).

    None when the file is missing or was removed while we waited: whoever removed it was
    deleting what it guards, so the caller should look again at what is current.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        if _same_file(fd, path):
            return fd
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def try_lock_exclusive(path: Path) -> int | None:
    """Exclusively lock `path` (created if missing) without waiting; None if anyone holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


BLOB_LIST_SUFFIX = ".blobs"


@dataclass(frozen=True)
class SnapshotFolder:
    """A repo's `snapshots/` folder: `<sha>/`, `<sha>.json` and `<sha>.lock` per commit."""

    path: Path

    def files(self, sha: str) -> Path:
        return self.path / sha

    def meta(self, sha: str) -> Path:
        return self.path / f"{sha}.json"

    def lease_file(self, sha: str) -> Path:
        return self.path / f"{sha}.lock"

    def is_complete(self, sha: str) -> bool:
        return self.files(sha).is_dir() and self.meta(sha).is_file() and self.lease_file(sha).is_file()

    def lease(self, current: Callable[[], str | None]) -> tuple[int, str] | None:
        """Share-lock the snapshot `current()` names: (descriptor to close, sha), or None.

        Looks again when GC removes the snapshot meanwhile (`current` has moved on then).
        """
        for _ in range(_LEASE_ATTEMPTS):
            sha = current()
            if sha is None:
                return None
            fd = lock_shared_if_present(self.lease_file(sha))
            if fd is None:
                continue
            if self.files(sha).is_dir() and self.meta(sha).is_file():
                return fd, sha
            os.close(fd)
        log.warning("could not lease a snapshot in %s: it kept changing", self.path)
        return None

    def remove_unleased(self, keep: str | None) -> list[str]:
        """Take every snapshot but `keep` that no one leases out of service; returns the shas.

        Each is renamed to `.trash-*` (O(1)); `empty_trash` deletes the files, later and off
        the refresh's path (worker/repos/cleanup.py). The caller holds the repo's refresh
        lock: builds happen only under it, so a half-built (.tmp-*) folder was left by a dead
        sync.
        """
        shas: set[str] = set()
        for entry in self.path.iterdir():
            if entry.name.startswith(".tmp-"):
                shutil.rmtree(entry, ignore_errors=True)
            elif entry.name.startswith(".trash-"):
                continue
            elif is_sha(sha := entry.name.split(".", 1)[0]) and sha != keep:
                shas.add(sha)
        removed = []
        for sha in sorted(shas):
            fd = try_lock_exclusive(self.lease_file(sha))
            if fd is None:
                continue  # a question still reads it; a later GC will try again
            trash = self.path / f".trash-{sha}-{os.getpid()}"
            try:
                if self.files(sha).exists():
                    os.rename(self.files(sha), trash)
                if self.blob_list(sha).exists():
                    os.rename(self.blob_list(sha), trash.with_name(trash.name + BLOB_LIST_SUFFIX))
                self.meta(sha).unlink(missing_ok=True)
                self.lease_file(sha).unlink(missing_ok=True)
            finally:
                os.close(fd)
            removed.append(sha)
        return removed

    def blob_list(self, sha: str) -> Path:
        """The store objects snapshot `sha` links (worker/repos/assemble.py writes it)."""
        return self.path / f"{sha}{BLOB_LIST_SUFFIX}"

    def empty_trash(self) -> set[str] | None:
        """Delete the files of snapshots taken out of service. Safe without the refresh lock:
        no one can read or lease a snapshot once it is trash.

        Returns the store objects ("g<generation>/<sha>") the deleted snapshots linked: the only
        ones this can have released, so blob GC visits them and nothing else; None when some
        deleted snapshot had no list (built before lists were kept): then only a full GC knows."""
        released: set[str] | None = set()
        lists = {entry for entry in self.path.glob(".trash-*") if entry.name.endswith(BLOB_LIST_SUFFIX)}
        for entry in self.path.glob(".trash-*"):
            if entry in lists:
                continue
            listed = entry.with_name(entry.name + BLOB_LIST_SUFFIX)
            if listed in lists and released is not None:
                try:
                    released.update(listed.read_text().split())
                except OSError:
                    released = None
            elif listed not in lists:
                released = None
            shutil.rmtree(entry, ignore_errors=True)
        for listed in lists:
            if not listed.with_name(listed.name.removesuffix(BLOB_LIST_SUFFIX)).exists():
                listed.unlink(missing_ok=True)
        return released


@dataclass
class TakeApart:
    """The right to take the served snapshot `sha` apart while its successor is built from it
    (worker/repos/materialize.py MoveFrom), held from `claim` to `retire` or `release`.

    `claim` takes its lease exclusively without waiting (so only when no question reads it;
    questions that ask meanwhile wait on the lease, then find the successor) and removes its
    metadata, so a crash half-way leaves it unservable rather than served incomplete.
    `release` gives it back whole (the caller has undone its moves); `retire` ends it after the
    successor is served: its lease file goes, so a question still waiting looks again."""

    folder: SnapshotFolder
    sha: str
    _fd: int | None = None
    _meta: bytes | None = None

    def claim(self) -> Path | None:
        fd = try_lock_exclusive(self.folder.lease_file(self.sha))
        if fd is None:
            return None
        try:
            self._meta = self.folder.meta(self.sha).read_bytes()
            self.folder.meta(self.sha).unlink()
        except OSError:
            os.close(fd)
            return None
        self._fd = fd
        return self.folder.files(self.sha)

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            if self._meta is not None:
                tmp = self.folder.path / f".meta-{self.sha}-{os.getpid()}.tmp"
                tmp.write_bytes(self._meta)
                os.replace(tmp, self.folder.meta(self.sha))
        finally:
            os.close(self._fd)
            self._fd = None

    def retire(self) -> None:
        if self._fd is None:
            return
        try:
            self.folder.lease_file(self.sha).unlink(missing_ok=True)
        finally:
            os.close(self._fd)
            self._fd = None
