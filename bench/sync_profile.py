"""Profile the first sync of many small repos: CPU per stage, per MB of source.

    .venv/bin/python bench/sync_profile.py [--repos 100] [--files 10] [--work DIR] [--top 25]

Builds the repos of bench/symbols.py (real Python files from site-packages, a slice per repo)
and runs `codebot repos sync`'s own code (worker/repos/sync_cli.py `run_sync`) over all of them,
one repo at a time (sync_max_parallel_repos=1), each repo's sync under cProfile with the
thread's CPU clock. Child processes (git, the blob processors) are not profiled: their CPU is
the process's RUSAGE_CHILDREN, reported as one line. Prints markdown: per stage, CPU seconds
(inclusive: a stage's time includes the stages it calls) and ms per MB of source; then the
functions of most own CPU. docs/operations.md records a run.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console

from bench.symbols import build_repos
from config.repos import load_whitelist
from config.settings import load_settings
from worker.repos import mirrors as mirrors_module
from worker.repos.sync_cli import run_sync

# (label, module file suffix, function name): inclusive CPU of each.
STAGES = [
    ("whole sync (parent process)", "repos/mirrors.py", "sync"),
    ("git fetch / clone (waiting on git)", "repos/mirror_lineage.py", "fetch"),
    ("secret lineage (which blobs are secret)", "repos/mirror_lineage.py", "secret_blobs"),
    ("serve: plan and build the snapshot", "repos/mirrors.py", "_serve"),
    ("snapshot build", "repos/assemble.py", "build_snapshot"),
    ("  blob processing (dispatch, store writes)", "repos/snapshot_processing.py", "process_missing"),
    ("  materialize (hardlinks)", "repos/materialize.py", "materialize"),
    ("  search listing (rg --files)", "repos/search_listing.py", "searched_listing"),
    ("  symbol index + name table", "repos/assemble.py", "write_snapshot_index"),
    ("    name table listing", "symbols_index/name_table.py", "list_snapshot"),
    ("  manifest", "repos/manifest.py", "write_manifest"),
    ("deferred symbol index", "repos/deferred_index.py", "finish_index"),
    ("after: collect old snapshots and blobs", "repos/mirror_upkeep.py", "_collect"),
    ("after: keep a spare", "repos/mirror_upkeep.py", "_keep_a_spare"),
    ("after: git maintenance", "repos/mirror_lineage.py", "maintain"),
]


def source_mb(work: Path) -> float:
    total = sum(f.stat().st_size for f in (work / "src").rglob("*.py"))
    return total / 1e6


def profiled_sync(profile: cProfile.Profile) -> Any:
    real = mirrors_module.Mirrors.sync

    def sync(self: Any, name: str, progress: Any = None) -> Any:
        profile.enable()
        try:
            return real(self, name, progress)
        finally:
            profile.disable()

    return real, sync


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repos", type=int, default=100)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-sync-profile"))
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    shutil.rmtree(args.work / "data", ignore_errors=True)  # a first sync, every time
    args.work.mkdir(parents=True, exist_ok=True)
    names = build_repos(args.work, args.repos, args.files)
    settings = load_settings(
        env_file=None,
        data_dir=args.work / "data",
        repos_file=args.work / "repos.toml",
        sync_max_parallel_repos=1,
    )
    profile = cProfile.Profile(time.thread_time)
    real, wrapped = profiled_sync(profile)
    mirrors_module.Mirrors.sync = wrapped  # type: ignore[method-assign]
    started, cpu = time.perf_counter(), time.process_time()
    try:
        status = run_sync(
            settings, load_whitelist(args.work / "repos.toml"), names, Console(file=io.StringIO())
        )
    finally:
        mirrors_module.Mirrors.sync = real  # type: ignore[method-assign]
    wall, parent = time.perf_counter() - started, time.process_time() - cpu
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    mb = source_mb(args.work)
    stats = pstats.Stats(profile)
    by_function: dict[tuple[str, str], float] = {}
    for (file, _line, function), (_cc, _nc, _tt, cumulative, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        key = (file, function)
        by_function[key] = max(by_function.get(key, 0.0), cumulative)
    print(
        f"{args.repos} repos, {mb:.1f} MB of Python source; exit {status}; wall {wall:.1f} s; "
        f"load {os.getloadavg()[0]:.2f} at the end\n"
    )
    print("| stage | CPU s | CPU ms / MB |\n|---|---:|---:|")
    for label, suffix, function in STAGES:
        seconds = sum(
            v for (file, name), v in by_function.items() if file.endswith(suffix) and name == function
        )
        print(f"| {label} | {seconds:.2f} | {seconds * 1000 / mb:.0f} |")
    child = children.ru_utime + children.ru_stime
    print(f"| child processes (git, blob processors; not profiled) | {child:.2f} | {child * 1000 / mb:.0f} |")
    print(f"| parent process, all threads | {parent:.2f} | {parent * 1000 / mb:.0f} |")
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(args.top)
    print("\nOwn CPU, top functions:\n```")
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[-4000:])
    print("```")


if __name__ == "__main__":
    main()
