"""Profile one machine's refresh of a 2-file push into a 10k-file repo, as a worker runs it.

    .venv/bin/python bench/push_profile.py [--files 10000] [--runs 3] [--top 20]

The repo of bench/webhooks.py (`--files` Python modules in 100 packages) behind a bare forge
repo; one machine's mirrors as `codebot worker` holds them (a BackgroundCleaner: old snapshots
and blobs go after the sync returns, a spare is linked for the next refresh). Synced twice
first (so the served snapshot has a build record and a spare, as after any refresh), then per
run: 2 files changed and pushed, `Mirrors.sync` timed (wall clock) under cProfile, and the
background cleaner waited out before the next run (untimed). Prints each stage's wall seconds
(inclusive, median of the runs) and the functions of most own time in the last run.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.sync_profile import STAGES
from bench.webhooks import commit_two_files, git, make_forge
from config.repos import load_whitelist
from config.settings import load_settings
from worker.repos.cleanup import BackgroundCleaner
from worker.repos.mirrors import Mirrors

EXTRA_STAGES = [
    ("search index after serving", "search_index/build.py", "index_snapshot"),
    ("  decide: list changes, plan, link targets", "repos/assemble.py", "_decide"),
    ("  describe (metadata)", "repos/assemble.py", "_describe"),
    ("  redacted paths", "repos/assemble.py", "_redacted_paths"),
    ("  save the build record", "repos/build_record.py", "save_record"),
    ("  load the previous build record", "repos/build_record.py", "load_record"),
    ("  blob list of the snapshot", "repos/blobstore.py", "linked_names"),
]


def stage_seconds(profile: cProfile.Profile) -> dict[str, float]:
    by_function: dict[tuple[str, str], float] = {}
    for (file, _line, function), (_cc, _nc, _tt, cumulative, _callers) in pstats.Stats(profile).stats.items():  # type: ignore[attr-defined]
        key = (file, function)
        by_function[key] = max(by_function.get(key, 0.0), cumulative)
    return {
        label: sum(v for (file, name), v in by_function.items() if file.endswith(suffix) and name == function)
        for label, suffix, function in [*STAGES, *EXTRA_STAGES]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-push-profile-") as tmp_name:
        run(Path(tmp_name), args.files, args.runs, args.top)


def run(tmp: Path, files: int, runs: int, top: int) -> None:
    work, bare = make_forge(tmp, files)
    repos_file = tmp / "repos.toml"
    repos_file.write_text(f'[[repo]]\nname = "big"\nurl = "{bare}"\nbranch = "main"\n')
    settings = load_settings(env_file=None, data_dir=tmp / "data", repos_file=repos_file)
    cleaner = BackgroundCleaner()
    mirrors = Mirrors(settings, load_whitelist(repos_file), cleaner)
    for number in range(2):  # a served snapshot with a build record and a spare, as after any refresh
        commit_two_files(work, f"warm {number}")
        git(work, "push", "--quiet", "origin", "main")
        assert mirrors.sync("big").ok
        cleaner.wait()
    walls: list[float] = []
    stages: list[dict[str, float]] = []
    profile = cProfile.Profile()
    for number in range(runs):
        commit_two_files(work, f"run {number}")
        git(work, "push", "--quiet", "origin", "main")
        profile = cProfile.Profile()
        started = time.perf_counter()
        profile.enable()
        result = mirrors.sync("big")
        profile.disable()
        walls.append(time.perf_counter() - started)
        assert result.ok and result.changed, result
        stages.append(stage_seconds(profile))
        cleaner.wait()
    print(f"{files:,} files, {runs} runs; load {os.getloadavg()[0]:.2f} at the end")
    print(f"Mirrors.sync wall seconds: median {statistics.median(walls):.3f} (all: "
          + ", ".join(f"{w:.3f}" for w in walls) + ")\n")  # fmt: skip
    print("| stage (inclusive, wall, under cProfile) | median s |\n|---|---:|")
    for label in stages[0]:
        print(f"| {label} | {statistics.median(s[label] for s in stages):.3f} |")
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(top)
    print("\nOwn time, top functions (last run):\n```")
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[-4000:])
    print("```")


if __name__ == "__main__":
    main()
