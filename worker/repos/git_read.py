"""Read-only git on a mirror, for the history tools: bounded in time and output, in a safe environment.

Every command runs with:

- an environment of our own, not the user's: no global or system git config (a user's
  `diff.external`, pager, textconv or alias never runs), pathspecs taken literally (a path like
  `:(glob)**` or `*` means that file name, nothing more), replace refs ignored, no prompts, no
  optional locks, the C locale;
- a timeout: git and its helpers are killed as a group when it passes;
- a cap on what git may print: beyond it git is stopped and the caller told the output was cut.

Objects (a ref resolved, a blob read) come from worker/repos/git_objects.py's long-lived readers.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from worker.ops.deadlines import DEADLINES as PROCESS_DEADLINES
from worker.ops.deadlines import Deadline

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


def kill_group(proc: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class _GitDeadlines:
    """Kills each registered git process (its whole group) when its deadline passes.

    On the process's one deadline thread (worker/ops/deadlines.py): a thread per command
    (threading.Timer) costs more than a small git command itself, and a polling thread fired up
    to a poll late. `remove` returns only once no kill can come any more, so the caller may then
    reap the process, whose id may be reused."""

    def add(self, proc: subprocess.Popen[Any], seconds: float) -> Deadline:
        return PROCESS_DEADLINES.add(seconds, functools.partial(kill_group, proc))

    def remove(self, deadline: Deadline) -> None:
        PROCESS_DEADLINES.cancel(deadline)


DEADLINES = _GitDeadlines()


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
        self._deadline = DEADLINES.add(self.proc, timeout)

    def __enter__(self) -> GitProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        DEADLINES.remove(self._deadline)
        if self.proc.poll() is None:
            kill_group(self.proc)
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
                kill_group(self.proc)
                return

    def stderr_text(self) -> str:
        """What git printed on stderr (its first 64 KiB), a warning of a success included."""
        self._stderr.seek(0)
        return self._stderr.read(65536).decode("utf-8", "replace")

    def timed_out(self) -> bool:
        return self.proc.returncode == -signal.SIGKILL and time.monotonic() - self.started >= self.timeout

    def finish(self) -> None:
        """After reading: raise GitReadError if git timed out or failed (a cut is not a failure)."""
        if self.proc.poll() is None:
            if self.cut:
                kill_group(self.proc)
            self.proc.wait()
        if self.timed_out():
            raise GitReadError(f"git {self.args[0]} took longer than {self.timeout:.3g} s and was stopped")
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


def shallow_edge(git_dir: Path) -> frozenset[str]:
    """The commits at the mirror's shallow edge: their parents were not fetched (history_depth)."""
    try:
        return frozenset(line.strip() for line in (git_dir / "shallow").read_text().split() if line.strip())
    except OSError:
        return frozenset()
