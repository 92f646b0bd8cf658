"""`codebot --version` and `--help` start at once: they load none of the heavy libraries nor the
worker's agent (what is imported is checked, not the time, which a busy machine stretches)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.this_repo import ROOT

# Each costs a tenth of a second of CPU or more to import; together ~0.8 s before codebot printed
# anything (bench/RESULTS.md, "CLI start").
HEAVY = ("openai", "rq", "redis", "slack_bolt", "discord", "tree_sitter", "pydantic", "rich", "worker.agent")

PROBE = """
import json, sys
from codebot.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def modules_loaded_by(*argv: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "100"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize("argv", [("--version",), ("--help",), ("ask", "--help")])
def test_version_and_help_load_no_heavy_library_nor_the_agent(argv: tuple[str, ...]) -> None:
    loaded = modules_loaded_by(*argv)
    assert "codebot.cli" in loaded
    heavy = sorted(name for name in loaded if any(name == h or name.startswith(h + ".") for h in HEAVY))
    assert heavy == []
