"""Read-only git on a mirror, for the history tools: bounded in time and output, in a safe environment.

Every command runs with:

- an environment of our own, not the user's: no global or system git config (a user's
  `diff.external`, pager, textconv or alias never runs), pathspecs taken literally (a path like
  `:(glob)**` or `*` means that file name, nothing more), replace refs ignored, no prompts, no
  optional locks, the C locale;
- a timeout: git and its helpers are killed as a group when it passes;
- a cap on what git may print: beyond it git is stopped and the caller told the output was cut.

`ObjectReader` is one long-lived `git cat-file --batch` per mirror and process: resolving a ref
or reading a blob then costs a round trip, not a process. It is restarted when the mirror's packs
change (a fetch, a gc), so it never pins deleted pack files, and after a fork.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

_CHUNK = 65536
_READER_IDLE_SECONDS = 300.0  # an unused reader is closed after this long (checked on each use)


class GitReadError(Exception):
    """A read-only git command failed, timed out or printed something unusable; fit to show."""


def read_env() -> dict[str, str]:
    """The environment of every read-only git command on a mirror (see the module docstring)."""
    env = {name: os.environ[name] for name in ("PATH", "TMPDIR", "SYSTEMROOT") if name in os.environ}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        HOME=os.devnull,  # older git, which ignores GIT_CONFIG_GLOBAL, finds no ~/.gitconfig either
        XDG_CONFIG_HOME=os.devnull,
        GIT_ATTR_NOSYSTEM="1",
        GIT_LITERAL_PATHSPECS="1",
        GIT_NO_REPLACE_OBJECTS="1",
        GIT_NO_LAZY_FETCH="1",
        GIT_OPTIONAL_LOCKS="0",
        GIT_TERMINAL_PROMPT="0",
        GIT_PAGER="cat",
        PAGER="cat",
        LC_ALL="C",
    )
    return env


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class _Deadlines:
    """One thread that kills each registered git process whose deadline passes.

    A thread per command (threading.Timer) costs more than a small git command itself, and so
    does waking a thread for each one: this one looks every WATCH_SECONDS while any deadline is
    registered, and ends after IDLE_SECONDS without one."""

    WATCH_SECONDS = 0.1
    IDLE_SECONDS = 10.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._due: dict[int, tuple[float, subprocess.Popen[Any]]] = {}
        self._next = 0
        self._thread: threading.Thread | None = None
        self._pid = 0

    def add(self, proc: subprocess.Popen[Any], seconds: float) -> int:
        with self._lock:
            if self._thread is None or self._pid != os.getpid():
                self._pid = os.getpid()  # after a fork the parent's thread is gone: start ours
                self._due.clear()
                self._thread = threading.Thread(target=self._watch, name="git-deadlines", daemon=True)
                self._thread.start()
            self._next += 1
            self._due[self._next] = (time.monotonic() + seconds, proc)
            return self._next

    def remove(self, token: int) -> None:
        with self._lock:
            self._due.pop(token, None)

    def _watch(self) -> None:
        idle_since = time.monotonic()
        while True:
            time.sleep(self.WATCH_SECONDS)
            now = time.monotonic()
            with self._lock:
                expired = [token for token, (due, _) in self._due.items() if due <= now]
                victims = [self._due.pop(token)[1] for token in expired]
                if self._due or victims:
                    idle_since = now
                elif now - idle_since > self.IDLE_SECONDS:
                    self._thread = None
                    return
            for proc in victims:
                _kill_group(proc)


_deadlines = _Deadlines()


def _complaint(stderr: bytes) -> str:
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    picked = [line for line in lines if line.startswith(("fatal:", "error:"))] or lines[-1:]
    return re.sub(r"^(fatal|error):\s*", "", picked[0])[:300] if picked else "git failed without a message"


class GitProcess:
    """One read-only git command whose output is read as it comes; use as a context manager.

    `chunks()` yields stdout until git ends, the byte cap is reached (then `cut` is True and git
    is stopped) or the caller stops reading (leaving the block stops git). `finish()` raises
    GitReadError for a timeout or a failure."""

    def __init__(self, git_dir: Path, args: list[str], timeout: float, max_bytes: int) -> None:
        self.args = args
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.cut = False
        self.read = 0
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed in __exit__)
        try:
            self.proc = subprocess.Popen(
                ["git", "--git-dir", str(git_dir), "--no-pager", *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=read_env(),
                start_new_session=True,
            )
        except FileNotFoundError:
            self._stderr.close()
            raise GitReadError("git is not installed (not found on PATH)") from None
        self.started = time.monotonic()
        self._deadline = _deadlines.add(self.proc, timeout)

    def __enter__(self) -> GitProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        _deadlines.remove(self._deadline)
        if self.proc.poll() is None:
            _kill_group(self.proc)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self.proc.wait()
        self._stderr.close()

    def chunks(self) -> Iterator[bytes]:
        assert self.proc.stdout is not None
        while chunk := self.proc.stdout.read1(_CHUNK):  # type: ignore[attr-defined]
            room = self.max_bytes - self.read
            if len(chunk) > room:
                chunk = chunk[:room]
                self.cut = True
            self.read += len(chunk)
            if chunk:
                yield chunk
            if self.cut:
                _kill_group(self.proc)
                return

    def timed_out(self) -> bool:
        return self.proc.returncode == -signal.SIGKILL and time.monotonic() - self.started >= self.timeout

    def finish(self) -> None:
        """After reading: raise GitReadError if git timed out or failed (a cut is not a failure)."""
        if self.proc.poll() is None:
            if self.cut:
                _kill_group(self.proc)
            self.proc.wait()
        if self.timed_out():
            raise GitReadError(f"git {self.args[0]} took longer than {self.timeout:g} s and was stopped")
        if self.proc.returncode != 0 and not self.cut:
            self._stderr.seek(0)
            raise GitReadError(_complaint(self._stderr.read(4096)))


@dataclass(frozen=True)
class GitOutput:
    data: bytes
    cut: bool  # the byte cap stopped git: `data` is its first max_bytes


def run_git(git_dir: Path, args: list[str], timeout: float, max_bytes: int) -> GitOutput:
    """Run one read-only git command to its end (or its cap); GitReadError if it failed."""
    with GitProcess(git_dir, args, timeout, max_bytes) as proc:
        data = b"".join(proc.chunks())
        proc.finish()
        return GitOutput(data, proc.cut)


# --- objects ---------------------------------------------------------------------------------


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
        _kill_group(proc)
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
            deadlines = [_deadlines.add(batch, self.timeout), _deadlines.add(check, self.timeout)]
            try:
                yield batch, check
            except (OSError, ValueError) as exc:
                self._batch.stop()
                self._check.stop()
                raise GitReadError(f"reading git objects failed ({exc})") from None
            finally:
                for deadline in deadlines:
                    _deadlines.remove(deadline)

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


def shallow_edge(git_dir: Path) -> frozenset[str]:
    """The commits at the mirror's shallow edge: their parents were not fetched (history_depth)."""
    try:
        return frozenset(line.strip() for line in (git_dir / "shallow").read_text().split() if line.strip())
    except OSError:
        return frozenset()
