"""Reading git objects from a mirror through long-lived `git cat-file` processes.

`ObjectReader` is one long-lived `git cat-file --batch` per mirror and process: resolving a ref
or reading a blob then costs a round trip, not a process. It is restarted when the mirror's packs
change (a fetch, a gc), so it never pins deleted pack files, and after a fork. Its processes run
in worker/repos/git_read.py's safe environment, under the same deadlines.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from worker.repos.git_read import DEADLINES, GitReadError, kill_group, read_env

_READER_IDLE_SECONDS = 300.0  # an unused reader is closed after this long (checked on each use)


@dataclass(frozen=True)
class GitObject:
    sha: str
    kind: str  # commit, tree, blob or tag
    size: int
    data: bytes | None  # None when it was larger than asked for


class _CatFile:
    """One long-lived `git cat-file --batch` (or `--batch-check`) process."""

    def __init__(self, git_dir: Path, mode: str) -> None:
        self.git_dir = git_dir
        self.mode = mode
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> subprocess.Popen[bytes]:
        if self.proc is not None and self.proc.poll() is not None:
            self.stop()
        if self.proc is None:
            try:
                self.proc = subprocess.Popen(
                    ["git", "--git-dir", str(self.git_dir), "cat-file", self.mode],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    env=read_env(),
                    start_new_session=True,
                )
            except FileNotFoundError:
                raise GitReadError("git is not installed (not found on PATH)") from None
        return self.proc

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        kill_group(proc)
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()  # type: ignore[union-attr]
        proc.wait()


def _header(line: bytes) -> tuple[str, str, int] | None:
    """(sha, type, size) of a cat-file reply, or None for a missing or ambiguous name."""
    fields = line.split()
    if len(fields) == 2 and fields[1] in (b"missing", b"ambiguous"):
        return None
    if len(fields) != 3 or not fields[2].isdigit():
        raise OSError(f"unexpected reply {line[:80]!r}")
    return fields[0].decode(), fields[1].decode(), int(fields[2])


_PIPELINE = 500  # requests written before their replies are read (well within a pipe's buffer)


class ObjectReader:
    """Long-lived `git cat-file` processes on one mirror; thread-safe, one request at a time.

    `lookup` reads one object by any name in one round trip; `lookup_many` reads many blobs in
    two (their sizes, then the ones small enough), however many there are."""

    def __init__(self, git_dir: Path, timeout: float) -> None:
        self.git_dir = git_dir
        self.timeout = timeout
        self.pid = os.getpid()
        self.packs = _packs_stamp(git_dir)
        self.used = time.monotonic()
        self.lock = threading.Lock()
        self._batch = _CatFile(git_dir, "--batch")
        self._check = _CatFile(git_dir, "--batch-check")

    def lookup(self, rev: str, max_bytes: int) -> GitObject | None:
        """The object `rev` names (a sha, a ref, `ref^{commit}`; `sha:path` is the caller's to
        refuse), or None when the mirror has no such object or the name is ambiguous.

        An object larger than max_bytes comes back without its data."""
        if any(c in rev for c in "\n\0"):
            raise GitReadError("an object name cannot hold a newline")
        with self._using() as (batch, _check):
            assert batch.stdin is not None and batch.stdout is not None
            batch.stdin.write(rev.encode("utf-8", "surrogateescape") + b"\n")
            batch.stdin.flush()
            found = _header(batch.stdout.readline())
            if found is None:
                return None
            sha, kind, size = found
            if size > max_bytes:
                self._batch.stop()  # reading it only to throw it away could take long: start afresh
                return GitObject(sha, kind, size, None)
            return GitObject(sha, kind, size, _read_exactly(batch.stdout, size + 1)[:size])

    def lookup_many(self, shas: list[str], max_bytes: int) -> dict[str, GitObject | None]:
        """The objects of `shas` (full shas); those larger than max_bytes without their data."""
        if any(not re.fullmatch(r"[0-9a-f]{40}", sha) for sha in shas):
            raise GitReadError("lookup_many takes full shas only")
        found: dict[str, GitObject | None] = {}
        with self._using() as (batch, check):
            assert batch.stdin and batch.stdout and check.stdin and check.stdout
            for start in range(0, len(shas), _PIPELINE):
                chunk = shas[start : start + _PIPELINE]
                check.stdin.write(b"".join(sha.encode() + b"\n" for sha in chunk))
                check.stdin.flush()
                sizes = {sha: _header(check.stdout.readline()) for sha in chunk}
                wanted = [sha for sha, head in sizes.items() if head is not None and head[2] <= max_bytes]
                for sha, head in sizes.items():
                    found[sha] = None if head is None else GitObject(head[0], head[1], head[2], None)
                batch.stdin.write(b"".join(sha.encode() + b"\n" for sha in wanted))
                batch.stdin.flush()
                for sha in wanted:
                    head = _header(batch.stdout.readline())
                    if head is None:
                        found[sha] = None
                        continue
                    found[sha] = GitObject(
                        head[0], head[1], head[2], _read_exactly(batch.stdout, head[2] + 1)[: head[2]]
                    )
        return found

    @contextlib.contextmanager
    def _using(self) -> Iterator[tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]]:
        """Both processes, started if needed, under the lock and a deadline; a failure stops them."""
        with self.lock:
            self.used = time.monotonic()
            stamp = _packs_stamp(self.git_dir)
            if stamp != self.packs:  # a fetch or gc changed the packs: never pin a deleted pack file
                self._batch.stop()
                self._check.stop()
                self.packs = stamp
            batch, check = self._batch.start(), self._check.start()
            deadlines = [DEADLINES.add(batch, self.timeout), DEADLINES.add(check, self.timeout)]
            try:
                yield batch, check
            except (OSError, ValueError) as exc:
                self._batch.stop()
                self._check.stop()
                raise GitReadError(f"reading git objects failed ({exc})") from None
            finally:
                for deadline in deadlines:
                    DEADLINES.remove(deadline)

    def close(self) -> None:
        with self.lock:
            self._batch.stop()
            self._check.stop()


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    parts: list[bytes] = []
    left = size
    while left > 0:
        part = stream.read(left)
        if not part:
            raise OSError("git cat-file ended early")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _packs_stamp(git_dir: Path) -> tuple[float, float]:
    stamps = []
    for path in (git_dir / "objects" / "pack", git_dir / "shallow"):
        try:
            stamps.append(path.stat().st_mtime)
        except OSError:
            stamps.append(0.0)
    return stamps[0], stamps[1]


_readers: dict[Path, ObjectReader] = {}
_readers_lock = threading.Lock()


def object_reader(git_dir: Path, timeout: float) -> ObjectReader:
    """This process's reader of `git_dir` (readers idle for 5 minutes are closed on the way)."""
    now = time.monotonic()
    with _readers_lock:
        for key, reader in list(_readers.items()):
            if reader.pid != os.getpid():
                del _readers[key]  # made before a fork: the parent's, never to be touched here
            elif key != git_dir and now - reader.used > _READER_IDLE_SECONDS:
                del _readers[key]
                reader.close()
        found = _readers.get(git_dir)
        if found is None:
            found = _readers[git_dir] = ObjectReader(git_dir, timeout)
        return found


@atexit.register
def _close_readers() -> None:
    for reader in list(_readers.values()):
        if reader.pid == os.getpid():
            reader.close()
