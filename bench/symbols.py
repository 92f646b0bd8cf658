"""Benchmark a symbol miss (a name defined nowhere in scope) across many repos.

    .venv/bin/python bench/symbols.py [--repos 300] [--files 10] [--work DIR] [--rounds 5]

Builds `--repos` small git repos from this venv's site-packages (`--files` real Python files
each, a different slice per repo, so each repo has its own names), syncs every one through
`Mirrors.sync` (what `codebot repos sync` runs: mirror, blob store, snapshot, symbol index),
then, with every repo in scope, each round times, back to back:

  find_definition miss    the tool through the registry, a fresh context (no result cache),
                          for a name defined nowhere (its "did you mean" included)
  find_definition typo    the same for a real name of one repo with two letters swapped
  find_references miss    the same through find_references
  floor: sqlite           one primary-key lookup in each repo's index (connect, one SELECT):
                          what "one lookup per index" costs at best
  floor: rg -l            raw ripgrep listing the files that hold the name, all snapshots at once

Reports medians and the median of the paired ratio miss / sqlite floor. `--work` keeps the
repos and the data dir, so a second run skips the syncs (it reuses what is synced). Prints
markdown; bench/RESULTS.md records a run.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from config.repos import load_whitelist
from config.settings import Settings, load_settings
from tests.support.fixture_repos import git
from worker.repos.mirrors import Mirrors
from worker.repos.snapshot import Snapshot
from worker.repos.symbols import index_path
from worker.tools import build_registry, make_context
from worker.tools.search import ripgrep_binary

MISSING = "xyzzy_never_defined_42"
_SKIP = {"__pycache__", "tests", "test"}


def source_files(count: int) -> list[Path]:
    """Real Python files of this venv's site-packages, 2-40 kB, in a stable order."""
    root = Path(sysconfig.get_paths()["purelib"])
    found = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP and not d.endswith(".dist-info"))
        for name in sorted(names):
            path = Path(folder) / name
            if name.endswith(".py") and 2_000 <= path.stat().st_size <= 40_000:
                found.append(path)
    if len(found) < count:
        raise SystemExit(f"only {len(found)} source files; ask for fewer repos or files")
    return found[:count]


def build_repos(work: Path, repos: int, files: int) -> list[str]:
    """The repos' names; each a git repo of its slice of files, listed in work/repos.toml."""
    sources = source_files(repos * files)
    names = [f"r{i:03d}" for i in range(repos)]
    lines = []
    for i, name in enumerate(names):
        repo = work / "src" / name
        if not (repo / ".git").is_dir():
            repo.mkdir(parents=True, exist_ok=True)
            git(repo, "init", "-q", "-b", "main")
            for n, source in enumerate(sources[i * files : (i + 1) * files]):
                target = repo / "pkg" / f"m{n:02d}_{source.name}"
                target.parent.mkdir(exist_ok=True)
                target.write_bytes(source.read_bytes())
            git(repo, "add", "-A")
            git(repo, "commit", "-q", "-m", "bench")
        lines.append(f'[[repo]]\nname = "{name}"\nurl = "{repo}"\nbranch = "main"\n')
    (work / "repos.toml").write_text("\n".join(lines))
    return names


def sync_all(work: Path, names: list[str]) -> tuple[Mirrors, Settings, float]:
    settings = load_settings(env_file=None, data_dir=work / "data", repos_file=work / "repos.toml")
    mirrors = Mirrors(settings, load_whitelist(work / "repos.toml"))
    started = time.process_time()
    for name in names:
        if mirrors.current(name) is None:
            result = mirrors.sync(name)
            if mirrors.current(name) is None:
                raise SystemExit(f"sync of {name} failed: {result}")
    return mirrors, settings, time.process_time() - started


def a_typo(snapshots: dict[str, Snapshot]) -> str:
    """A real function name of the middle repo with two inner letters swapped."""
    middle = snapshots[sorted(snapshots)[len(snapshots) // 2]]
    db = sqlite3.connect(index_path(middle.root))
    try:
        store = db.execute("SELECT value FROM meta WHERE key = 'store'").fetchone()[0]
        db.execute("ATTACH ? AS s", (str(index_path(middle.root).parent / store),))
        name: str = db.execute(
            "SELECT d.name FROM s.defs d JOIN files f ON f.unit = d.unit "
            "WHERE d.kind = 'function' AND length(d.name) >= 10 ORDER BY d.name LIMIT 1"
        ).fetchone()[0]
    finally:
        db.close()
    return name[:3] + name[4] + name[3] + name[5:]


def timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def floor_sqlite(snapshots: dict[str, Snapshot]) -> None:
    for snapshot in snapshots.values():
        db = sqlite3.connect(f"{index_path(snapshot.root).as_uri()}?mode=ro", uri=True)
        db.execute("SELECT value FROM meta WHERE key = ?", (MISSING,)).fetchall()
        db.close()


def floor_rg(snapshots: dict[str, Snapshot]) -> None:
    roots = [str(s.root) for s in snapshots.values()]
    subprocess.run([ripgrep_binary(), "-l", "-F", MISSING, *roots], capture_output=True, check=False)


def measure(settings: Settings, snapshots: dict[str, Snapshot], rounds: int) -> dict[str, list[float]]:
    registry = build_registry()
    typo = a_typo(snapshots)

    def tool(name: str, symbol: str) -> Callable[[], object]:
        def run() -> object:
            outcome = registry.call(make_context(settings, snapshots), name, {"symbol": symbol})
            if outcome.ok or "no definition" not in outcome.text:
                raise SystemExit(f"{name}({symbol!r}) did not miss: {outcome.text[:300]}")
            return outcome

        return run

    calls: dict[str, Callable[[], object]] = {
        "find_definition miss": tool("find_definition", MISSING),
        "find_definition typo": tool("find_definition", typo),
        "find_references miss": tool("find_references", MISSING),
        "floor: sqlite (one lookup per index)": lambda: floor_sqlite(snapshots),
        "floor: rg -l (all snapshots)": lambda: floor_rg(snapshots),
    }
    hint = registry.call(make_context(settings, snapshots), "find_definition", {"symbol": typo}).text
    print(f"typo {typo!r} -> {hint[hint.find('Did you mean') :][:120]!r}\n", file=sys.stderr)
    for call in calls.values():
        call()  # warm the page cache
    times: dict[str, list[float]] = {label: [] for label in calls}
    for _ in range(rounds):
        for label, call in calls.items():
            times[label].append(timed(call))
    return times


def report(times: dict[str, list[float]], repos: int, files: int, sync_cpu: float) -> str:
    floor = times["floor: sqlite (one lookup per index)"]
    lines = [
        f"{repos} repos of {files} Python files; load {os.getloadavg()[0]:.2f} at the end; "
        f"sync CPU {sync_cpu:.1f} s (0 when already synced)",
        "",
        "| call | median ms | min ms | ÷ sqlite floor (median of paired ratios) |",
        "|---|---:|---:|---:|",
    ]
    for label, values in times.items():
        ratio = statistics.median(v / f for v, f in zip(values, floor, strict=True))
        lines.append(
            f"| {label} | {statistics.median(values) * 1000:.1f} | {min(values) * 1000:.1f} | {ratio:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repos", type=int, default=300)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-symbols"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    names = build_repos(args.work, args.repos, args.files)
    mirrors, settings, sync_cpu = sync_all(args.work, names)
    with mirrors.lease(names) as snapshots:
        times = measure(settings, snapshots, args.rounds)
    print(report(times, args.repos, args.files, sync_cpu))


if __name__ == "__main__":
    main()
