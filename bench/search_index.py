"""The search index, through the real `search` tool: org-wide search time against raw `rg`.

    PYTHONPATH=$PWD .venv/bin/python bench/search_index.py [REPOS] [--keep DIR] [--repeats 5]

Each top-level package of this venv's site-packages (the first REPOS by name, default 30) is
committed into a git repo and made a snapshot as the worker makes one (tests/support's
`snapshot_repo`: processed blobs, manifest), then indexed by `index_snapshot`. `--keep DIR`
builds there once and reuses it on the next run. Per pattern, after one untimed warm-up:

  indexed  the `search` tool through the registry, no `repo` (every repo), fresh context
  walk     the same tool over a data dir without an index: one `rg` per repo in turn
  rg       raw ripgrep over all snapshots in one process (`rg -n --no-heading --hidden -e P
           root1 root2 …`), output read and discarded: the floor the issue's ratios use

and the indexed run's stages, from timers around the tool's own functions: the index look-up
(`index_plan`: plan, SQL), the choice of the files ripgrep is given (`candidate_batches`:
manifests, exclusions), ripgrep with the reading of its output (`_search_repo`), the answer
(`_report`). Medians over the repetitions; p50 and worst over the patterns.
"""

from __future__ import annotations

import argparse
import shutil
import site
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from config.repos import RepoSpec
from config.settings import Settings, load_settings
from tests.support.fixture_repos import git, snapshot_repo
from worker.repos.search_index.build import index_snapshot
from worker.repos.search_index.store import index_file
from worker.repos.snapshot import Snapshot
from worker.tools import build_registry, make_context
from worker.tools.search import ripgrep_binary

PATTERNS = ["def retry", "class \\w+Error", "DeprecationWarning", "import (json|yaml)", "TODO|FIXME",
            "zxqv_never", "__init__", "(?i)sqlite3", "timeout\\s*=", "\\d+\\.\\d+"]  # fmt: skip
STAGES = {"index_plan": "index", "candidate_batches": "choose", "_search_repo": "rg", "_report": "answer"}


def build(count: int, work: Path) -> dict[str, Snapshot]:
    """The snapshots (built once into `work`, reused when they are there)."""
    packages = Path(site.getsitepackages()[0])
    sources = sorted(
        p for p in packages.iterdir() if p.is_dir() and not p.name.endswith(("-info", "__pycache__"))
    )[:count]
    settings = load_settings(env_file=None, data_dir=work / "data")
    snapshots = {}
    for source in sources:
        name = source.name.lower().replace("_", "-").strip("-.") or "x"
        root = work / "repos" / name / "snapshots" / "s"
        if not root.is_dir():
            origin = work / "origin" / name
            shutil.copytree(source, origin, ignore=shutil.ignore_patterns("__pycache__"))
            git(origin, "init", "-q", "-b", "main")
            git(origin, "add", "-A", "--force")
            git(origin, "commit", "-q", "-m", "corpus")
            snapshot_repo(origin, name, root, settings=settings)
            shutil.rmtree(origin)
        index_snapshot(settings, name, root)  # at once when it is indexed already
        spec = RepoSpec(name=name, url=name, display_url=name, branch="main")
        snapshots[name] = Snapshot(spec, "0" * 40, "main", root, 0.0, 0.0)
    return snapshots


def timed_stages(totals: dict[str, float]) -> None:
    """Timers around the search tool's own functions (the code path is unchanged)."""
    module = sys.modules["worker.tools.search"]
    for function, stage in STAGES.items():
        original = getattr(module, function, None)
        if original is None:  # code from before that stage existed
            continue

        def timed(*args: Any, _original: Callable[..., Any] = original, _stage: str = stage) -> Any:
            started = time.perf_counter()
            try:
                return _original(*args)
            finally:
                totals[_stage] = totals.get(_stage, 0.0) + time.perf_counter() - started

        setattr(module, function, timed)


def tool(settings: Settings, snapshots: dict[str, Snapshot], pattern: str) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    outcome = build_registry().call(make_context(settings, snapshots), "search", {"pattern": pattern})
    return time.perf_counter() - started, outcome.data or {}


def raw_rg(snapshots: dict[str, Snapshot], pattern: str) -> float:
    command = [ripgrep_binary(), "--no-config", "-n", "--no-heading", "--hidden", "--no-require-git"]
    started = time.perf_counter()
    process = subprocess.Popen(
        [*command, "-e", pattern, *(str(s.root) for s in snapshots.values())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    while process.stdout.read(1 << 20):
        pass
    process.wait()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("repos", nargs="?", type=int, default=30)
    parser.add_argument("--keep", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    work = options.keep or Path(tempfile.mkdtemp(prefix="bench-index-"))
    started = time.monotonic()
    snapshots = build(options.repos, work)
    indexed = load_settings(env_file=None, data_dir=work / "data")
    walk = indexed.model_copy(update={"data_dir": work / "no-index"})
    source = sum(f.stat().st_size for s in snapshots.values() for f in s.root.rglob("*") if f.is_file())
    disk = index_file(indexed).stat().st_size
    print(f"{len(snapshots)} repos, {source / 1e6:.0f} MB of snapshot files, index {disk / 1e6:.1f} MB "
          f"({disk / source:.2f}× source); ready in {time.monotonic() - started:.0f} s\n")  # fmt: skip
    print("| pattern | matches | indexed ms | index | choose | rg | answer | walk ms | raw rg ms | rg ÷ indexed | walk ÷ indexed |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    totals: dict[str, float] = {}
    timed_stages(totals)
    rows = []
    for pattern in PATTERNS:
        tool(indexed, snapshots, pattern), tool(walk, snapshots, pattern), raw_rg(snapshots, pattern)
        totals.clear()
        runs = [tool(indexed, snapshots, pattern) for _ in range(options.repeats)]
        stages = {stage: totals.get(stage, 0.0) / options.repeats * 1000 for stage in STAGES.values()}
        ours = statistics.median(t for t, _ in runs)
        plain = statistics.median(tool(walk, snapshots, pattern)[0] for _ in range(options.repeats))
        floor = statistics.median(raw_rg(snapshots, pattern) for _ in range(options.repeats))
        data = runs[0][1]
        rows.append((ours, floor / ours, plain / ours))
        print(f"| `{pattern}` | {data.get('total')}{'+' if data.get('total_is_lower_bound') else ''} "
              f"({data.get('index')}) | {ours * 1000:.0f} | "
              + " | ".join(f"{stages[s]:.0f}" for s in STAGES.values())
              + f" | {plain * 1000:.0f} | {floor * 1000:.0f} | ×{floor / ours:.2f} | ×{plain / ours:.1f} |",
              flush=True)  # fmt: skip
    times = sorted(r[0] for r in rows)
    print(f"\np50 {statistics.median(times) * 1000:.0f} ms, worst {times[-1] * 1000:.0f} ms; "
          f"rg ÷ indexed: median ×{statistics.median(r[1] for r in rows):.2f}, worst ×{min(r[1] for r in rows):.2f}; "
          f"walk ÷ indexed: median ×{statistics.median(r[2] for r in rows):.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
