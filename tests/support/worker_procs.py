"""Real `codebot worker` processes for fault tests: started with a test's settings, found, killed.

    worker = start_worker(rig.settings)                # `codebot worker`, its own session
    horses = horse_pids(worker.pid)                      # forked work horses (own process groups)
    os.kill(worker.pid, signal.SIGKILL)                  # the parent: its horses die with it
    stop_worker(worker)                                  # SIGTERM, then SIGKILL; never leaves one behind

Every setting that differs from its default is passed through the environment, as an operator
would set it, so the worker process runs with exactly the test's configuration.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, SecretStr
from redis import Redis
from rq import Worker

from config.settings import Settings

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# How long a slow test waits for a question to settle (answered, apologised for) after a fault:
# a hang guard, seconds on an idle machine and a minute or more at load 16 on 2 cores, where
# workers take tens of seconds to start (slow tests have 600 s of their own, tests/conftest.py)
SETTLE_SECONDS = 180.0


def settings_env(settings: Settings, **extra: Any) -> dict[str, str]:
    """The environment that makes `load_settings()` in a child process equal `settings`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEBOT_", "REDIS_URL", "OPENAI_"))}
    for field, info in Settings.model_fields.items():
        value = getattr(settings, field)
        if value == info.default or value is None:
            continue
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        alias = info.validation_alias
        name = alias.choices[0] if isinstance(alias, AliasChoices) else f"CODEBOT_{field.upper()}"
        if isinstance(value, SecretStr):
            env[str(name)] = value.get_secret_value()
        elif isinstance(value, bool):
            env[str(name)] = "true" if value else "false"
        elif isinstance(value, tuple | list | dict):
            env[str(name)] = json.dumps(list(value) if isinstance(value, tuple) else value)
        else:
            env[str(name)] = str(value)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def start_worker(
    settings: Settings, *args: str, log: Path | None = None, **extra_env: Any
) -> subprocess.Popen[bytes]:
    """`codebot worker ARGS` in a session of its own (so killpg reaches all of it but no test)."""
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - the child keeps it
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "codebot.cli", "worker", *args],
            env=settings_env(settings, **extra_env),
            cwd=PROJECT_ROOT,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    finally:
        if log:
            out.close()  # type: ignore[union-attr]


def session_pids(session: int) -> list[int]:
    """Every live process of a session (what systemd's KillMode=control-group signals, for a
    service whose processes stay in its session; RQ's horses leave only the process group)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError):
                if os.getsid(int(entry.name)) == session and alive(int(entry.name)):
                    pids.append(int(entry.name))
    return pids


def children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(child) for child in found]


def horse_pids(worker_pid: int) -> list[int]:
    """Work horses under a `codebot worker`: RQ puts each in a process group of its own."""
    horses = []
    for child in children(worker_pid) + [g for c in children(worker_pid) for g in children(c)]:
        with suppress(ProcessLookupError):
            if os.getpgid(child) == child and alive(child) and _same_program(child, worker_pid):
                horses.append(child)  # a fork of the worker, not a git or ripgrep it started
    return horses


def _same_program(pid: int, worker_pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes() == Path(f"/proc/{worker_pid}/cmdline").read_bytes()
    except OSError:
        return False


def wait_for_horse(worker_pid: int, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        horses = horse_pids(worker_pid)
        if horses:
            return horses[0]
        time.sleep(0.05)
    raise AssertionError(f"no work horse under worker {worker_pid} after {timeout} s")


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_registered(redis: Redis, process: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    """Until the `codebot worker` started as `process` has registered with RQ: started up and
    listening (a busy machine takes many seconds to import it; the bound is a hang guard)."""
    deadline = time.monotonic() + timeout
    while not any(f"-{process.pid}-" in worker.name for worker in Worker.all(connection=redis)):
        if process.poll() is not None:
            raise AssertionError(f"worker {process.pid} exited with {process.returncode} before registering")
        if time.monotonic() > deadline:
            raise AssertionError(f"worker {process.pid} not registered after {timeout} s")
        time.sleep(0.05)


def wait_dead(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} still alive after {timeout} s")
        time.sleep(0.02)


def stop_worker(process: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    """Warm stop, then kill the whole session if it lingers."""
    if process.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=timeout)
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
