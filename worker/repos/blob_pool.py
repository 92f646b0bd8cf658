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
    idle: list[_Process] = []
    busy: dict[int, _Process] = {}
    size = max(1, min(limits.workers, (len(queue) + 7) // 8))
    try:
        while queue or busy:
            while queue and len(busy) < size:
                worker = idle.pop() if idle else _start(git_dir, objects, limits)
                task = queue.popleft()
                worker.task, worker.stage = task, "stored" if task.op == "process" else "parsed"
                worker.deadline = time.monotonic() + limits.timeout_seconds
                try:
                    worker.send(
                        {
                            "op": task.op,
                            "sha": task.sha,
                            "grammars": list(task.grammars),
                            "parse_max_bytes": limits.parse_max_bytes,
                        }
                    )
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
                for message in messages:
                    on_message(message)
                    if message[0] == "stored":
                        worker.stage = "parsed"
                        worker.deadline = time.monotonic() + limits.timeout_seconds
                    else:  # parsed, or failed: the task is over
                        worker.task = None
                if worker.task is None:
                    del busy[fd]
                    idle.append(worker)
            now = time.monotonic()
            for fd, worker in list(busy.items()):
                if worker.deadline <= now:
                    del busy[fd]
                    _fail(worker, f"processing took longer than {limits.timeout_seconds:g} s", on_message)
    finally:
        for worker in [*idle, *busy.values()]:
            worker.kill()


def _fail(worker: _Process, reason: str, on_message: Callable[[tuple[Any, ...]], None]) -> None:
    """Stop a process whose blob went wrong and report that blob as failed at its current stage."""
    task = worker.task
    worker.kill()
    if task is not None:
        log.warning("blob %s withheld at stage %s: %s", task.sha, worker.stage, reason)
        on_message(("failed", task.sha, worker.stage, reason))
