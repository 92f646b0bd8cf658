"""The worst tool call on the hostile repos of the red-team suite (issue 19), against a floor.

    .venv/bin/python bench/redteam.py [--runs 5]

Builds the red-team history (tests/support/redteam_repo.py: renamed and edited secret files, a
token in a message, a UTF-16 message) and the history fixture (tests/support/history_repo.py),
mirrors each with the real Mirrors, and times every route the red-team suite drives (read_file,
search, blame, find_definition, list_files, show, diff, log, log queries of both kinds) through
the real tool registry. The floor, measured in the same run, is one raw `git log -1` on the same
mirror: what starting any git costs on this machine now. Goal: worst call < 1 s.

Prints a markdown table; bench/RESULTS.md records a run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.history_repo import build_history_repo, mirrored
from tests.support.redteam_repo import build_redteam_repo
from worker.tools import build_registry

REGISTRY = build_registry()


def calls_for(shas: dict[str, str], secrets: list[str]) -> list[tuple[str, dict[str, Any]]]:
    files = ["config.defaults", "defaults.link", "config/service.txt", "src/retry.py", "src/clients.py"]
    calls: list[tuple[str, dict[str, Any]]] = [("log", {}), ("list_files", {"path": ""})]
    calls += [("read_file", {"path": path}) for path in files]
    calls += [("blame", {"path": path}) for path in files]
    calls += [("search", {"pattern": "FAVORITE|envmarker|token"}), ("find_definition", {"symbol": "main"})]
    calls += [("show", {"sha": sha}) for sha in shas.values()]
    calls += [("diff", {"from": sha}) for sha in shas.values()]
    for secret in secrets:
        calls += [
            ("log", {"query": secret[:10]}),
            ("log", {"query": secret[:10] + "|REDACTED", "regex": True}),
        ]
    return calls


def floor(git_dir: Path, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(["git", "--git-dir", str(git_dir), "log", "-1", "--format=%H"], capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def bench(name: str, served: Any, shas: dict[str, str], secrets: list[str], runs: int) -> list[str]:
    rows = []
    calls = calls_for(shas, secrets)
    worst: tuple[float, str] = (0.0, "")
    total = []
    for tool, arguments in calls:
        times = []
        for _ in range(runs):
            ctx = served.context()
            started = time.perf_counter()
            REGISTRY.call(ctx, tool, {"repo": "app", **arguments})
            times.append(time.perf_counter() - started)
        median = statistics.median(times)
        total.append(median)
        label = f"{tool} {', '.join(f'{k}={str(v)[:12]}' for k, v in arguments.items())}"
        worst = max(worst, (max(times), label))
    base = floor(served.snapshot.git_dir, runs * 3)
    rows.append(
        f"| {name} | {len(calls)} | {statistics.median(total) * 1000:.1f} | {worst[0] * 1000:.1f} "
        f"(`{worst[1]}`) | {base * 1000:.1f} | {worst[0] / base:.0f}x |"
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    rows = [
        "| hostile repo | calls | median call (ms) | worst call (ms) | floor: raw `git log -1` (ms) | worst / floor |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        team = build_redteam_repo(base / "redteam")
        with mirrored(team.repo, base / "m1") as served:
            rows += bench(
                "red team (tests/support/redteam_repo.py)", served, team.repo.shas, team.secrets, args.runs
            )
        history = build_history_repo(base / "history")
        with mirrored(history, base / "m2") as served:
            rows += bench("history (tests/support/history_repo.py)", served, history.shas, history.secrets[:6],
                          args.runs)  # fmt: skip
    print("\n".join(rows))


if __name__ == "__main__":
    main()
