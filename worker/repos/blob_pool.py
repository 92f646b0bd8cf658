"""A pool of blob processor processes with a time and a memory bound per blob.

`run_tasks` hands the tasks out to up to `workers` processes (worker/repos/blob_worker.py) and
reports every outcome through `on_message`. Each process lives under RLIMIT_AS
(`blob_memory_bytes`); a blob that takes longer than `blob_timeout_seconds` at one stage (redact,
or parse) gets its process killed, and so does a process that dies on its own (a parser crash,
the memory limit): either way the blob is reported as failed with the reason, and a fresh process
takes the next task. The caller withholds a blob that failed to be stored: nothing is ever
shipped raw.
"""

from __future__ import annotations

import logging
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worker.repos.blob_worker import HEADER

log = logging.getLogger(__name__)

# The folder holding the `worker` package, so `python -m worker.repos.blob_worker` imports this
# very code whatever the caller's cwd or sys.path.
_PROJECT_ROOT = str(Path(__file__).resolve().parents[2])


@dataclass(frozen=True)
class Task:
    op: str  # "process" (read from git, redact, store, parse) or "parse" (an already stored blob)
    sha: str
    grammars: tuple[str, ...] = ()


@dataclass
class _Process:
    proc: subprocess.Popen[bytes]
    buffer: bytearray = field(default_factory=bytearray)
    task: Task | None = None
    stage: str = "stored"
    deadline: float = 0.0

    @property
    def fd(self) -> int:
        assert self.proc.stdout is not None
        return self.proc.stdout.fileno()

    def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        self.proc.stdin.write(HEADER.pack(len(payload)) + payload)
        self.proc.stdin.flush()

    def messages(self) -> list[Any] | None:
        """Whatever complete answers are readable now; None when the process has died."""
        try:
            chunk = os.read(self.fd, 1 << 20)
        except OSError:
            chunk = b""
        if not chunk:
            return None
        self.buffer += chunk
        found = []
        while len(self.buffer) >= HEADER.size:
            (length,) = HEADER.unpack_from(self.buffer)
            if len(self.buffer) < HEADER.size + length:
                break
            found.append(pickle.loads(bytes(self.buffer[HEADER.size : HEADER.size + length])))
            del self.buffer[: HEADER.size + length]
        return found

    def kill(self) -> None:
        with suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # and its git cat-file
        for stream in (self.proc.stdin, self.proc.stdout):
            with suppress(OSError):
                if stream is not None:
                    stream.close()
        self.proc.wait()


@dataclass(frozen=True)
class PoolLimits:
    workers: int
    timeout_seconds: float
    memory_bytes: int
    parse_max_bytes: int


_START_TIMEOUT_SECONDS = 120.0  # importing the parsers on a loaded machine; never a blob's time


def _start(git_dir: Path, objects: Path, limits: PoolLimits) -> _Process:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PROJECT_ROOT, env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "worker.repos.blob_worker",
            str(git_dir),
            str(objects),
            str(limits.memory_bytes),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=None,  # a processor that cannot start says why in this process's log
        env=env,
        start_new_session=True,  # its own group: a kill takes its git cat-file along
    )
    worker = _Process(proc)
    deadline = time.monotonic() + _START_TIMEOUT_SECONDS
    while True:  # wait for ("ready",): a blob's time bound must not pay for the imports
        left = deadline - time.monotonic()
        messages = worker.messages() if left > 0 and select.select([worker.fd], [], [], left)[0] else None
        if messages is None:
            worker.kill()
            raise OSError("a blob processor did not start (its error is in this process's log)")
        if messages:
            return worker


def run_tasks(
    git_dir: Path,
    objects: Path,
    tasks: Iterable[Task],
    limits: PoolLimits,
    on_message: Callable[[tuple[Any, ...]], None],
) -> None:
    """Run every task; each outcome reaches `on_message` as ("stored"|"parsed"|"failed", sha, …)."""
    queue = deque(tasks)
    if not queue:
        return
    key = (str(git_dir), str(objects), limits)
    idle: list[_Process] = []
    busy: dict[int, _Process] = {}
    size = max(1, min(limits.workers, (len(queue) + 7) // 8))
    try:
        while queue or busy:
            while queue and len(busy) < size:
                worker = idle.pop() if idle else _WARM.take(key) or _start(git_dir, objects, limits)
                try:
                    _give(worker, queue.popleft(), limits)
                except OSError:
                    _fail(worker, "the processor could not be started", on_message)
                    continue
                busy[worker.fd] = worker
            wait = max(0.0, min(w.deadline for w in busy.values()) - time.monotonic())
            readable, _, _ = select.select(list(busy), [], [], wait)
            for fd in readable:
                worker = busy[fd]
                messages = worker.messages()
                if messages is None:
                    del busy[fd]
                    _fail(
                        worker,
                        f"its processor died (memory bound {limits.memory_bytes >> 20} MB)",
                        on_message,
                    )
                    continue
                _pass_on(worker, messages, limits, on_message)
                if worker.task is None:
                    del busy[fd]
                    idle.append(worker)
            _stop_late(busy, limits, on_message)
    finally:
        for worker in busy.values():
            worker.kill()
        for worker in idle:
            _WARM.keep(key, worker)


def _give(worker: _Process, task: Task, limits: PoolLimits) -> None:
    """Send `task` to `worker`, its time bound starting now (OSError: the worker is gone)."""
    worker.task, worker.stage = task, "stored" if task.op == "process" else "parsed"
    worker.deadline = time.monotonic() + limits.timeout_seconds
    worker.send(
        {
            "op": task.op,
            "sha": task.sha,
            "grammars": list(task.grammars),
            "parse_max_bytes": limits.parse_max_bytes,
        }
    )


def _pass_on(
    worker: _Process, messages: list[Any], limits: PoolLimits, on_message: Callable[[tuple[Any, ...]], None]
) -> None:
    """Hand each of a worker's messages on; a stored blob's parse gets its own time bound, and any
    other message ends the task."""
    for message in messages:
        on_message(message)
        if message[0] == "stored":
            worker.stage = "parsed"
            worker.deadline = time.monotonic() + limits.timeout_seconds
        else:  # parsed, or failed: the task is over
            worker.task = None


def _stop_late(
    busy: dict[int, _Process], limits: PoolLimits, on_message: Callable[[tuple[Any, ...]], None]
) -> None:
    """Stop every busy worker past its deadline; its blob fails at the stage it was in."""
    now = time.monotonic()
    for fd, worker in list(busy.items()):
        if worker.deadline <= now:
            del busy[fd]
            _fail(worker, f"processing took longer than {limits.timeout_seconds:g} s", on_message)


_IDLE_SECONDS = (
    900.0  # how long a processor waits for the repo's next sync (refreshes come every few minutes)
)
_MAX_IDLE = 4  # processors kept waiting in one process, over all repos


class _WarmProcessors:
    """Processors kept after a sync for the next one of the same repo: starting one imports the
    parsers and compiles the redaction rules (0.3-1.5 s), which would otherwise be most of a
    small refresh. Each still serves one blob at a time under its bounds. A forked child never
    uses its parent's (the pipes are the parent's); an idle one exits when this process does
    (its stdin closes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._idle: list[tuple[float, tuple[str, str, PoolLimits], _Process]] = []

    def take(self, key: tuple[str, str, PoolLimits]) -> _Process | None:
        with self._lock:
            self._expire()
            for at, (_, held_key, worker) in enumerate(self._idle):
                if held_key == key:
                    del self._idle[at]
                    return worker
        return None

    def keep(self, key: tuple[str, str, PoolLimits], worker: _Process) -> None:
        if worker.proc.poll() is not None or worker.buffer:
            worker.kill()
            return
        with self._lock:
            self._expire()
            self._idle.append((time.monotonic() + _IDLE_SECONDS, key, worker))
            while len(self._idle) > _MAX_IDLE:
                self._idle.pop(0)[2].kill()

    def _expire(self) -> None:
        if os.getpid() != self._pid:  # a forked child: the parent's processors are not ours
            self._pid, self._idle = os.getpid(), []
        now = time.monotonic()
        for entry in [e for e in self._idle if e[0] <= now or e[2].proc.poll() is not None]:
            self._idle.remove(entry)
            entry[2].kill()


_WARM = _WarmProcessors()


def _fail(worker: _Process, reason: str, on_message: Callable[[tuple[Any, ...]], None]) -> None:
    """Stop a process whose blob went wrong and report that blob as failed at its current stage."""
    task = worker.task
    worker.kill()
    if task is not None:
        log.warning("blob %s withheld at stage %s: %s", task.sha, worker.stage, reason)
        on_message(("failed", task.sha, worker.stage, reason))
