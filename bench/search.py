"""Benchmark the `search` tool against raw ripgrep and grep on large real corpora.

    .venv/bin/python bench/search.py [--repeats 9] [--keep DIR]

Corpora, built from what every machine with this venv has:
  stdlib       the Python standard library's sources (sysconfig "stdlib", without __pycache__,
               site-packages and the compiled config-*/lib-dynload folders)
  stdlib+site  the same plus this venv's site-packages (without __pycache__)
Each is committed into a temp git repo and archived with `git archive | tar -x` into a
snapshot, exactly as the worker makes snapshots.

For every pattern, each repetition runs, back to back on the same corpus:
  search  our tool in-process through the registry (fresh context: no result cache)
  rg      raw ripgrep as a person runs it (`rg -n --no-heading --hidden -e PATTERN`), run to
          completion with its output read and discarded (never /dev/null: rg detects that and
          stops at the first match)
  grep    `grep -rnI -E [-i] -e PATTERN .` (no .gitignore or size limits: a reference only)
The page cache is warmed by one untimed run of all three per pattern. Reported: medians,
and the median over repetitions of the paired ratio search/rg. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from config.settings import Settings, load_settings
from tests.support.fixture_repos import git, snapshot_repo
from worker.repos.snapshot import Snapshot
from worker.tools import build_registry, make_context
from worker.tools.search import ripgrep_binary

# (label, pattern, ignore_case): the same regex means the same thing to rg and grep -E.
PATTERNS = [
    ("literal", "ThreadPoolExecutor", False),
    ("alternation", "raise (ValueError|TypeError)\\(", False),
    ("case-insensitive", "deprecationwarning", True),
    ("rare", "xyzzy_never_there_42", False),
    ("many-hit", "self", False),
]
_SKIP_STDLIB = {"__pycache__", "site-packages", "lib-dynload"}


def _ignore(skip: set[str]) -> Callable[[str, list[str]], set[str]]:
    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n in skip or n.startswith("config-3") or n == ".git"}

    return ignore


def build_corpora(work: Path) -> dict[str, Snapshot]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    site = Path(sysconfig.get_paths()["purelib"])
    corpora: dict[str, Snapshot] = {}
    for name, sources in [("stdlib", [stdlib]), ("stdlib+site", [stdlib, site])]:
        repo = work / "repos" / name
        for source in sources:
            target = repo / source.name if len(sources) > 1 else repo
            skip = _SKIP_STDLIB if source == stdlib else {"__pycache__"}
            shutil.copytree(source, target, symlinks=True, ignore=_ignore(skip), dirs_exist_ok=True)
        started = time.perf_counter()
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A", "--force")
        git(repo, "commit", "-q", "-m", "corpus")
        corpora[name] = snapshot_repo(repo, name.replace("+", "-"), work / "snapshots" / name)
        shutil.rmtree(repo)  # only the snapshot is searched; free the disk
        print(f"# built {name}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return corpora


def raw_rg(pattern: str, ignore_case: bool, *more: str) -> list[str]:
    """The floor: ripgrep as a person would run it (line numbers, dotfiles, .gitignore honoured)."""
    flags = ["-i"] if ignore_case else []
    return [
        ripgrep_binary(),
        "--no-config",
        "-n",
        "--no-heading",
        "--hidden",
        "--no-require-git",
        *flags,
        *more,
        "-e",
        pattern,
    ]


def _drain(command: list[str], cwd: Path) -> tuple[float, int, int]:
    """Run a command reading all its output; (seconds, output bytes, output lines)."""
    started = time.perf_counter()
    # stdin from /dev/null: without a path argument rg searches stdin when that is a pipe.
    process = subprocess.Popen(
        command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdout is not None
    size = lines = 0
    while chunk := process.stdout.read(1 << 20):
        size += len(chunk)
        lines += chunk.count(b"\n")
    process.wait()
    return time.perf_counter() - started, size, lines


def _ours(settings: Settings, snapshot: Snapshot, pattern: str, ignore_case: bool) -> tuple[float, int, bool]:
    registry = build_registry()
    started = time.perf_counter()
    ctx = make_context(settings, {snapshot.repo.name: snapshot})
    outcome = registry.call(ctx, "search", {"pattern": pattern, "ignore_case": ignore_case})
    elapsed = time.perf_counter() - started
    if not outcome.ok:
        raise SystemExit(f"search failed: {outcome.text}")
    return elapsed, int(outcome.data["total"]), bool(outcome.data["total_is_lower_bound"])


@dataclass
class Row:
    corpus: str
    label: str
    pattern: str
    rg_matches: int
    ours_total: str
    ours: list[float]
    rg: list[float]
    grep: list[float]

    def ratio(self) -> float:
        return statistics.median(o / r for o, r in zip(self.ours, self.rg, strict=True))


def run(corpora: dict[str, Snapshot], repeats: int) -> list[Row]:
    settings = load_settings(env_file=None)
    rows = []
    for corpus, snapshot in corpora.items():
        for label, pattern, ignore_case in PATTERNS:
            rg = raw_rg(pattern, ignore_case)
            grep = ["grep", "-rnI", "-E", *(["-i"] if ignore_case else []), "-e", pattern, "."]
            # Untimed warm-up of all three, which also counts matches.
            _, total, lower = _ours(settings, snapshot, pattern, ignore_case)
            _, _, rg_matches = _drain(rg, snapshot.root)
            _drain(grep, snapshot.root)
            row = Row(corpus, label, pattern, rg_matches, f"{'>' if lower else ''}{total:,}", [], [], [])
            for _ in range(repeats):
                row.ours.append(_ours(settings, snapshot, pattern, ignore_case)[0])
                row.rg.append(_drain(rg, snapshot.root)[0])
                row.grep.append(_drain(grep, snapshot.root)[0])
            rows.append(row)
            print(f"# {corpus} {label}: ratio {row.ratio():.2f}", file=sys.stderr)
    return rows


def _size(root: Path) -> tuple[int, int]:
    files = size = 0
    for folder, _, names in os.walk(root):
        for name in names:
            files += 1
            size += os.lstat(os.path.join(folder, name)).st_size
    return files, size


def report(corpora: dict[str, Snapshot], rows: list[Row], repeats: int) -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown CPU",
    )
    rg_version = subprocess.run([ripgrep_binary(), "--version"], capture_output=True, text=True).stdout.split(
        "\n"
    )[0]
    grep_version = subprocess.run(["grep", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    out = [
        f"Machine: {os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, {rg_version}, {grep_version}.",
        f"Page cache warmed by one untimed run of each tool per pattern; {repeats} timed repetitions each.",
        "",
    ]
    for name, snapshot in corpora.items():
        files, size = _size(snapshot.root)
        out.append(f"- `{name}`: {files:,} files, {size / 1e6:.0f} MB")
    out += [
        "",
        "| corpus | pattern | kind | rg matches | search reports | search s | rg s | grep s | search/rg |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        med = [statistics.median(times) for times in (row.ours, row.rg, row.grep)]
        out.append(
            f"| {row.corpus} | `{row.pattern.replace('|', chr(92) + '|')}` | {row.label} | {row.rg_matches:,} | "
            f"{row.ours_total} | {med[0]:.3f} | {med[1]:.3f} | {med[2]:.3f} | {row.ratio():.2f} |"
        )
    ratios = [row.ratio() for row in rows if row.label != "many-hit"]
    out += [
        "",
        f"Median search/rg over the full-scan patterns (all but many-hit): {statistics.median(ratios):.2f}; "
        f"worst: {max(ratios):.2f}. Many-hit: search stops ripgrep after "
        f"{load_settings(env_file=None).search_count_limit:,} counted matches.",
    ]
    return "\n".join(out)


# (label, tool, arguments, the floor's command): adversarial inputs for every bounded call.
ADVERSARIAL = [
    ("search: a 1.9 MB line, every byte a match", "search", {"pattern": "x", "glob": "one_line.txt"}),
    ("search: a million short matching lines", "search", {"pattern": "^y$", "glob": "short_lines.txt"}),
    (
        "search: nested quantifiers over the long line",
        "search",
        {"pattern": "(x+x+)+y", "glob": "one_line.txt"},
    ),
    (
        "search: a 50-way alternation, whole corpus",
        "search",
        {"pattern": "|".join(f"w{i:02d}q" for i in range(50))},
    ),
    ("list_files: glob over every file", "list_files", {"glob": "*.py"}),
    ("read_file: a missing path (suggestions)", "read_file", {"path": "asyncio/tasks_missing.py"}),
]


def adversarial_corpus(work: Path, corpus: Snapshot) -> Snapshot:
    """The stdlib+site snapshot's files plus the adversarial ones, as one more snapshot."""
    repo = work / "repos" / "adversarial"
    shutil.copytree(corpus.root, repo, symlinks=True)
    (repo / "one_line.txt").write_text("x" * 1_900_000 + "\n")
    (repo / "short_lines.txt").write_text("y\n" * 1_000_000)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A", "--force")
    git(repo, "commit", "-q", "-m", "adversarial")
    snapshot = snapshot_repo(repo, "adversarial", work / "snapshots" / "adversarial")
    shutil.rmtree(repo)
    return snapshot


def _floor(tool: str, arguments: dict[str, object]) -> list[str]:
    if tool == "search":  # the same files: the whole tree, filtered by the same glob
        glob = arguments.get("glob")
        return raw_rg(str(arguments["pattern"]), False, *(["-g", str(glob)] if glob else []))
    if tool == "list_files":
        return [
            ripgrep_binary(),
            "--no-config",
            "--files",
            "--hidden",
            "--no-require-git",
            "-g",
            str(arguments["glob"]),
        ]
    return ["ls", "asyncio"]  # a missing path: the floor is listing its folder


def adversarial_report(snapshot: Snapshot, repeats: int) -> str:
    settings = load_settings(env_file=None)
    registry = build_registry()
    out = [
        "| call | ours s (median) | floor | floor s | ratio | ≤ 1 s or ≤ 3× | what it said |",
        "|---|---:|---|---:|---:|---|---|",
    ]
    for label, tool, arguments in ADVERSARIAL:
        ours, floor = [], []
        said = ""
        for _ in range(repeats):
            ctx = make_context(settings, {"adversarial": snapshot})
            started = time.perf_counter()
            outcome = registry.call(ctx, tool, {"repo": "adversarial", **arguments})
            ours.append(time.perf_counter() - started)
            said = outcome.text.splitlines()[0][:70].replace("|", "\\|")
            floor.append(_drain(_floor(tool, arguments), snapshot.root)[0])
        mine, theirs = statistics.median(ours), statistics.median(floor)
        ok = "yes" if mine <= 1.0 or mine <= 3 * theirs else "**no**"
        floor_command = _floor(tool, arguments)
        command = " ".join([Path(floor_command[0]).name, *floor_command[1:]])
        out.append(
            f"| {label} | {mine:.3f} | `{command[:60].replace('|', chr(92) + '|')}` | {theirs:.3f} | "
            f"{mine / theirs:.1f} | {ok} | {said} |"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--keep", type=Path, help="build the corpora here and keep them")
    parser.add_argument("--adversarial-only", action="store_true", help="only the adversarial table")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="codebot-bench-"))
    try:
        corpora = build_corpora(work)
        print(f"load: {os.getloadavg()[0]:.2f} (1 min average)")
        if not args.adversarial_only:
            rows = run(corpora, args.repeats)
            print(report(corpora, rows, args.repeats))
        print("\n### Adversarial inputs (stdlib+site plus a 1.9 MB line and a million short lines)\n")
        print(adversarial_report(adversarial_corpus(work, corpora["stdlib+site"]), args.repeats))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
