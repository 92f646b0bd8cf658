"""What a new user's first commands install: the README's run line installs what running codebot
needs and not the contributors' tools, and the README's test command (`bash .ci/run`) installs
Debian packages only where CI is set, printing on a developer's machine what it would install."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.this_repo import ROOT

SYSTEM_PACKAGES = "chromium chromium-driver fonts-noto-color-emoji prometheus postgresql"
# What .ci/run needs from the machine up to its first pip step, found on PATH as anywhere.
REAL_TOOLS = ("bash", "env", "dirname", "id")


def run_ci_with_stubs(tmp_path: Path, ci: str | None) -> tuple[str, list[str]]:
    """Run a copy of .ci/run on a PATH where apt-get, sudo and python3 are stubs that log their
    arguments (python3 then fails, ending the run at its first step after the system packages),
    and where chromedriver and promtool are missing. Returns (output, the stubs' log lines)."""
    shutil.copytree(ROOT / ".ci", tmp_path / "checkout" / ".ci")
    stubs, log = tmp_path / "bin", tmp_path / "calls.log"
    stubs.mkdir()
    for tool in REAL_TOOLS:
        (stubs / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    for stub, then in (("apt-get", "exit 0"), ("sudo", 'exec "$@"'), ("python3", "exit 3")):
        (stubs / stub).write_text(f'#!/bin/sh\necho "{stub} $*" >> {log}\n{then}\n', encoding="utf-8")
        (stubs / stub).chmod(0o755)
    env = {"PATH": str(stubs), "HOME": str(tmp_path)} | ({"CI": ci} if ci is not None else {})
    done = subprocess.run(
        [str(stubs / "bash"), str(tmp_path / "checkout" / ".ci" / "run")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3, done.stdout + done.stderr  # it went on, to python3 -m venv
    return done.stdout + done.stderr, log.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("ci", [None, "false"])
def test_on_a_developers_machine_the_ci_script_prints_the_apt_line_and_runs_no_apt_get(
    tmp_path: Path, ci: str | None
) -> None:
    output, calls = run_ci_with_stubs(tmp_path, ci=ci)
    assert calls == ["python3 -m venv .venv"]  # no apt-get, no sudo: it went on to the venv
    printed = " ".join(output.split())
    assert "not installing (CI is not set)" in printed
    assert f"apt-get install -y -qq --no-install-recommends {SYSTEM_PACKAGES}" in printed


def test_where_ci_is_set_the_ci_script_installs_the_system_packages(tmp_path: Path) -> None:
    _, calls = run_ci_with_stubs(tmp_path, ci="true")
    apt = [call.removeprefix("sudo ") for call in calls if not call.startswith("python3")]
    assert apt[0] == "apt-get update -qq"
    assert apt[-1] == f"apt-get install -y -qq --no-install-recommends {SYSTEM_PACKAGES}"
    assert calls[-1] == "python3 -m venv .venv"


def test_the_readme_runs_codebot_from_the_base_install_not_the_contributors_tools() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = readme.split("```sh\n", 1)[1].split("```", 1)[0]
    installs = re.findall(r"pip install ([^&\n]*)", first_block)
    assert installs, "the README's first commands install nothing"
    assert all(re.search(r"(?:^|\s)-e \.(?:\s|$)", line) for line in installs), installs
