"""Benchmark the history tools against raw git, and what history costs on disk.

    .venv/bin/python bench/history.py [--commits 10000] [--runs 15] [--keep DIR]

A repo of `--commits` commits is generated with `git fast-import` (400 Python files; each commit
rewrites one to three functions of random files, by one of four authors), mirrored by the real
Mirrors with all of its history, and then, in one run, each tool is timed against raw git given
the same arguments, each pair interleaved and each on its own commits or files (the tools keep
no result between calls; the one long-lived `git cat-file` per mirror is part of the tools):

  log -G    log(query=…, regex=true, match="diff")     vs  git log -G… -n21 --format=…
  log path  log(path=…)                                vs  git log -n21 --follow --format=… -- path
  blame     blame(path, 1, 80)                         vs  git blame --porcelain -L 1,80 <sha> -- path
  show      show(sha)                                  vs  git show <sha>
  diff      diff(from, to)                             vs  git diff <from> <to>

The goal is <= 1.2x raw git. Then the disk cost of history: the mirror at history_depth 1,
1,000 and all, next to the snapshot, and a refresh after one new commit at depth 1,000.

Prints markdown tables; bench/RESULTS.md records a run.
"""

from __future__ import annotations

import argparse
import io
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from config.repos import load_whitelist
from config.settings import load_settings
from worker.repos.mirrors import Mirrors
from worker.tools import build_registry, make_context

FILES = 400
AUTHORS = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Linus Torvalds"]


def generate(repo: Path, commits: int) -> None:
    """A bare repo of `commits` commits on main, written by git fast-import in one go."""
    rng = random.Random(15)
    files = {
        f"src/mod{i:03d}.py": [f"def f{i}_{j}(x):\n    return x + {j}\n" for j in range(40)]
        for i in range(FILES)
    }
    stream = io.BytesIO()

    def data(payload: bytes) -> None:
        stream.write(b"data %d\n%s\n" % (len(payload), payload))

    for number in range(commits):
        who = rng.choice(AUTHORS)
        ident = f"{who} <{who.split()[0].lower()}@example.invalid> {1_600_000_000 + number * 600} +0000"
        stream.write(
            f"commit refs/heads/main\nmark :{number + 1}\nauthor {ident}\ncommitter {ident}\n".encode()
        )
        data(
            f"Change {number}: tune the retry backoff of module {number % FILES}\n\nWhy: measured.\n".encode()
        )
        if number:
            stream.write(b"from :%d\n" % number)
        changed = (
            list(files)
            if number == 0
            else [f"src/mod{rng.randrange(FILES):03d}.py" for _ in range(rng.randint(1, 3))]
        )
        for path in changed:
            if number:
                chunks = files[path]
                slot = rng.randrange(len(chunks))
                chunks[slot] = (
                    f"def f_{number}_{slot}(x):\n    return x * {number}  # backoff {rng.random():.4f}\n"
                )
            stream.write(f"M 100644 inline {path}\n".encode())
            data("".join(files[path]).encode())
        stream.write(b"\n")
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(repo)], check=True)
    subprocess.run(
        ["git", "--git-dir", str(repo), "fast-import", "--quiet"], input=stream.getvalue(), check=True
    )
    subprocess.run(["git", "--git-dir", str(repo), "gc", "-q"], check=True)


def mirrors_of(root: Path, source: Path, depth: str) -> Mirrors:
    root.mkdir(parents=True, exist_ok=True)
    (root / "repos.toml").write_text(
        f'[[repo]]\nname = "big"\nurl = "{source}"\nbranch = "main"\nhistory_depth = {depth}\n',
        encoding="utf-8",
    )
    settings = load_settings(env_file=None, data_dir=root / "data", repos_file=root / "repos.toml")
    return Mirrors(settings, load_whitelist(root / "repos.toml"))


def size_of(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def raw_git(git_dir: Path, args: list[str]) -> None:
    subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, check=True)


def pair(runs: int, tool: Callable[[int], Any], raw: Callable[[int], Any]) -> tuple[float, float]:
    """Median seconds of each, interleaved, run i of each on the same input i."""
    tool(runs)  # warm the page cache and the object reader once
    raw(runs)
    tool_times, raw_times = [], []
    for i in range(runs):
        started = time.perf_counter()
        tool(i)
        tool_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        raw(i)
        raw_times.append(time.perf_counter() - started)
    return statistics.median(tool_times), statistics.median(raw_times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="codebot-history-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        run(base, args.commits, args.runs)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


def run(base: Path, commits: int, runs: int) -> None:
    source = base / "source.git"
    started = time.perf_counter()
    generate(source, commits)
    print(f"generated {commits:,} commits with git fast-import in {time.perf_counter() - started:.1f} s\n")

    mirrors = mirrors_of(base / "all", source, '"all"')
    started = time.perf_counter()
    assert mirrors.sync("big").ok
    full_sync = time.perf_counter() - started
    registry = build_registry()
    rng = random.Random(1)
    with mirrors.lease(["big"]) as snapshots:
        snapshot = snapshots["big"]
        git_dir = snapshot.git_dir
        assert git_dir is not None
        shas = subprocess.run(["git", "--git-dir", str(git_dir), "rev-list", "main"], capture_output=True,
                              text=True, check=True).stdout.split()  # fmt: skip
        picks = [shas[rng.randrange(1, len(shas) - 1)] for _ in range(runs + 1)]
        paths = [f"src/mod{rng.randrange(FILES):03d}.py" for _ in range(runs + 1)]
        needles = [f"f_{rng.randrange(commits // 2, commits)}_" for _ in range(runs + 1)]
        fmt = "--format=%H%x1f%P%x1f%ct%x1f%at%x1f%an%x1f%ae%x1f%B"

        def tool(name: str, **arguments: Any) -> None:
            outcome = registry.call(
                make_context(mirrors.settings, snapshots), name, {"repo": "big", **arguments}
            )
            assert outcome.ok, outcome.text

        cases: dict[str, tuple[Callable[[int], Any], Callable[[int], Any]]] = {
            "log -G": (
                lambda i: tool("log", query=needles[i], regex=True, match="diff"),
                lambda i: raw_git(git_dir, ["log", f"-G{needles[i]}", "-n21", fmt, snapshot.sha]),
            ),
            "log path": (
                lambda i: tool("log", path=paths[i]),
                lambda i: raw_git(git_dir, ["log", "-n21", "--follow", fmt, snapshot.sha, "--", paths[i]]),
            ),
            "blame": (
                lambda i: tool("blame", path=paths[i], start_line=1, end_line=80),
                lambda i: raw_git(
                    git_dir, ["blame", "--porcelain", "-L", "1,80", snapshot.sha, "--", paths[i]]
                ),
            ),
            "show": (
                lambda i: tool("show", sha=picks[i]),
                lambda i: raw_git(git_dir, ["show", picks[i]]),
            ),
            "diff": (
                lambda i: tool("diff", **{"from": f"{picks[i]}~5", "to": picks[i]}),
                lambda i: raw_git(git_dir, ["diff", f"{picks[i]}~5", picks[i]]),
            ),
        }
        print(f"{commits:,} commits, {FILES} files; median of {runs} runs each, interleaved\n")
        print("| operation | tool (ms) | raw git, same arguments (ms) | ratio |")
        print("|---|---:|---:|---:|")
        for label, (ours, theirs) in cases.items():
            mine, raw = pair(runs, ours, theirs)
            print(f"| {label} | {mine * 1000:.1f} | {raw * 1000:.1f} | {mine / raw:.2f}x |")

    print(
        f"\nfirst sync with all {commits:,} commits: {full_sync:.1f} s (fetch, secret-blob scan, snapshot)\n"
    )
    print(
        "| history_depth | commits in the mirror | mirror.git | snapshot (its own files) | first sync (s) |"
    )
    print("|---|---:|---:|---:|---:|")
    for depth in ("1", "1000", '"all"'):
        other = mirrors_of(base / f"depth-{depth.strip(chr(34))}", source, depth)
        started = time.perf_counter()
        assert other.sync("big").ok
        seconds = time.perf_counter() - started
        repo_root = other.root / "big"
        count = subprocess.run(["git", "--git-dir", str(repo_root / "mirror.git"), "rev-list", "--count", "main"],
                               capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        current = other.current("big")
        assert current is not None
        print(f"| {depth.strip(chr(34))} | {int(count):,} | {size_of(repo_root / 'mirror.git') / 1e6:.1f} MB | "
              f"{size_of(current.root) / 1e6:.1f} MB | {seconds:.1f} |")  # fmt: skip

    refreshed = mirrors_of(base / "depth-1000", source, "1000")
    work = base / "work"
    subprocess.run(["git", "clone", "-q", str(source), str(work)], check=True)
    (work / "src/mod001.py").write_text("def changed():\n    return 1\n", encoding="utf-8")
    identity = ["-c", "user.name=bench", "-c", "user.email=bench@codebot.invalid"]
    subprocess.run(["git", *identity, "-C", str(work), "commit", "-qam", "one more"], check=True)
    subprocess.run(["git", "-C", str(work), "push", "-q", "origin", "main"], check=True)
    started = time.perf_counter()
    assert refreshed.sync("big").ok
    print(f"\nrefresh after one new commit at history_depth 1000: {time.perf_counter() - started:.2f} s")


if __name__ == "__main__":
    main()
