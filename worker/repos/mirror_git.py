"""git on a mirror that talks to the remote (clone, fetch, gc): credentials kept out of argv and
out of every message, progress reported, a timeout, and a watch on the disk reserve.

The read-only git of the history tools is worker/repos/git_read.py.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from config.repos import ALL_HISTORY, RepoSpec
from config.settings import Settings
from worker.repos.disk import Watchdog

Progress = Callable[[str, float | None], None]
REMOTE = "codebot"  # a remote whose url reaches git only through the environment
_PROGRESS_LINE = re.compile(r"^(?:remote: )?([A-Z][a-z]+(?: [a-z]+)*):\s+(\d+)%")
# The fetch phases we can measure, as slices of one bar; making the snapshot takes the rest.
# (Small fetches are unpacked as loose objects instead of received as a pack.)
_PHASE_SPAN = {
    "Receiving objects": (0.0, 0.7),
    "Unpacking objects": (0.0, 0.7),
    "Resolving deltas": (0.7, 0.85),
}
_URL_USERINFO = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@'\"]+@")


def history_depth(spec: RepoSpec, settings: Settings) -> int | None:
    """Commits of history the mirror of `spec` keeps back from the tip; None: all of it.

    The repo's `history_depth` (repos.toml), else `history_depth` (the setting), capped by
    `history_max_depth`."""
    depth = spec.history_depth if spec.history_depth is not None else settings.history_depth
    cap = settings.history_max_depth
    if depth == ALL_HISTORY:
        return cap or None
    return min(depth, cap) if cap else depth


class GitError(Exception):
    """A git step failed; the message is scrubbed of credentials and fit to show a user."""


class GitTimedOut(GitError):
    """A git step outlived its `git_timeout_seconds` and was killed."""


class GitOutOfSpace(GitError):
    """A git step was stopped because the disk's free space fell under the reserve."""


def scrub(text: str, spec: RepoSpec) -> str:
    """Remove the repo URL's credential (and any `user:pass@` in any URL) from text."""
    text = text.replace(spec.url, spec.display_url)
    parts = urlsplit(spec.url) if "://" in spec.url else None
    secrets = [parts.password] if parts and parts.password else []
    if parts and parts.username and not parts.password and len(parts.username) >= 20:
        secrets.append(parts.username)  # a token used as the user name
    for secret in secrets:
        if secret and len(secret) >= 3:
            text = text.replace(secret, "***")
    return _URL_USERINFO.sub(r"\1", text)


def _git_env(spec: RepoSpec) -> dict[str, str]:
    """The user's environment (SSH agent, credential helpers) plus our remote and no prompts.

    The URL goes in as config through the environment, not argv: argv is world-readable in
    `ps`, so a credential there would leak to every local user. Local paths become file://
    URLs because git ignores --depth for plain paths.
    """
    env = dict(os.environ)
    env["GIT_TERMINAL_PROMPT"] = "0"
    config = {f"remote.{REMOTE}.url": Path(spec.url).as_uri() if spec.url.startswith("/") else spec.url}
    if "://" in spec.url and urlsplit(spec.url).username:
        # The URL carries its own credential: keep helpers from storing it (`store` would
        # write it in plain text to ~/.git-credentials) by emptying the helper list.
        config["credential.helper"] = ""
    index = int(env.get("GIT_CONFIG_COUNT") or 0)
    for key, value in config.items():
        env[f"GIT_CONFIG_KEY_{index}"], env[f"GIT_CONFIG_VALUE_{index}"] = key, value
        index += 1
    env["GIT_CONFIG_COUNT"] = str(index)
    return env


def _reason(lines: list[str]) -> str:
    """git's most specific complaint: its first `fatal:`/`error:` line, else its last line."""
    complaints = [line for line in lines if line.startswith(("fatal:", "error:"))]
    line = complaints[0] if complaints else lines[-1] if lines else "git failed without a message"
    return re.sub(r"^(fatal|error):\s*", "", line)[:300]


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    """Kill a process and its helpers (ssh, git-remote-https), which share its session.

    Killing git alone would leave a helper holding our pipe open, and reading it would hang.
    """
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _report_git_progress(line: str, report: Progress) -> None:
    match = _PROGRESS_LINE.match(line)
    if match:
        span = _PHASE_SPAN.get(match.group(1))
        fraction = span[0] + (span[1] - span[0]) * int(match.group(2)) / 100 if span else None
        report(match.group(1).lower(), fraction)


def _start_git(spec: RepoSpec, mirror: Path, args: list[str], stdout: IO[bytes]) -> subprocess.Popen[bytes]:
    """git on the mirror in a session of its own (no terminal to prompt on), stderr piped."""
    try:
        return subprocess.Popen(
            ["git", "--git-dir", str(mirror), *args],
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=_git_env(spec),
            start_new_session=True,
        )
    except FileNotFoundError:
        raise GitError("git is not installed (not found on PATH)") from None


def _read_stderr(proc: subprocess.Popen[bytes], report: Progress | None) -> list[str]:
    """git's stderr read as it comes (each progress line reported) until git closes it; its last
    lines, for the complaint."""
    assert proc.stderr is not None
    lines: list[str] = []
    pending = b""
    while chunk := proc.stderr.read1(65536):  # type: ignore[attr-defined]
        *complete, pending = re.split(rb"[\r\n]", pending + chunk)
        for raw in complete:
            if line := raw.decode("utf-8", "replace").strip():
                lines = [*lines[-49:], line]
                if report is not None:
                    _report_git_progress(line, report)
    lines.append(pending.decode("utf-8", "replace").strip())
    return lines


def run_mirror_git(
    spec: RepoSpec,
    mirror: Path,
    args: list[str],
    timeout: float,
    data_root: Path,
    reserve: int = 0,
    report: Progress | None = None,
    stdout: IO[bytes] | None = None,
) -> str:
    """Run git on a mirror: its stdout, or GitError with its complaint (scrubbed).

    Killed after `timeout` seconds, and as soon as free space under `data_root` falls below
    `reserve` bytes (0: not watched).

    stderr is read as it comes, to drive `report` from --progress; stdout goes to a file,
    so no pipe can fill up and stall git. start_new_session detaches git and ssh from our
    terminal, so neither can prompt there: a missing credential fails instead of hanging.
    """
    with tempfile.TemporaryFile() as out:
        proc = _start_git(spec, mirror, args, stdout or out)
        started = time.monotonic()
        timer = threading.Timer(timeout, _kill_group, [proc])
        timer.start()
        watchdog = Watchdog(data_root, reserve, partial(_kill_group, proc))
        try:
            watchdog.__enter__()
            lines = _read_stderr(proc, report)
            proc.wait()
        finally:
            watchdog.__exit__()
            timer.cancel()
            proc.stderr.close()  # type: ignore[union-attr]
        if watchdog.tripped is not None:
            raise GitOutOfSpace(watchdog.message(f"git {args[0]}"))
        if proc.returncode == -signal.SIGKILL and time.monotonic() - started >= timeout:
            raise GitTimedOut(f"git {args[0]} timed out after {timeout:g} s")
        if proc.returncode != 0:
            raise GitError(scrub(_reason([line for line in lines if line]), spec))
        out.seek(0)
        return out.read().decode("utf-8", "replace").strip()
