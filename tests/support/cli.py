"""`codebot` run as a user runs it: a real subprocess of the command line, output captured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CODEBOT = [sys.executable, "-m", "codebot.cli"]


def run_codebot(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
    inherit_environment: bool = True,
    stdin: str = "",
) -> subprocess.CompletedProcess[str]:
    """`codebot ARGS…` with `env` over this process's environment (or alone, when
    `inherit_environment` is false); `stdin` piped in (by default an empty one, never the
    test runner's: `codebot ask` reads a piped stdin as the question's context)."""
    return subprocess.run(
        [*CODEBOT, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})} if inherit_environment else dict(env or {}),
        cwd=cwd,
        timeout=timeout,
    )
