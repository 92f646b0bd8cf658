"""Benchmark disk per repo ÷ its .git on real repositories, with their history.

    .venv/bin/python bench/disk.py [--mirrors DIR] [owner/name ...]

bench/refresh.py measures disk on a synthetic corpus: this venv's files committed once, the worst
case for the ratio (no history, so `.git` is only the compressed checkout, while codebot keeps the
bare mirror and the redacted text as plain files for ripgrep). A team's repos have history. Here
each repo (`--mirrors DIR`: a local git mirror at DIR/owner+name/repo, else cloned from GitHub) is
cloned once with its checkout, as a developer has it (the floor: that clone's `.git`), then synced
by `Mirrors.sync` into a data dir of its own, with the settings as deployed (`history_depth` 1000,
the background cleaner's spare), and counted as `du` counts (each inode once, directories too).

Prints one markdown row per repo: commits, files, its `.git`, codebot's disk (mirror and lineage,
snapshots with their indexes, the store's objects and database), the ratio (goal ≤ 2), and git's
own clone with its checkout for reference. bench/RESULTS.md records a run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.refresh import folder_size
from config.repos import load_whitelist
from config.settings import load_settings
from worker.repos.blobstore import BlobStore
from worker.repos.cleanup import BackgroundCleaner
from worker.repos.mirrors import Mirrors

REPOS = (
    "rq/rq",
    "pallets/flask",
    "spf13/cobra",
    "slackapi/python-slack-sdk",
    "gitleaks/gitleaks",
    "com-lihaoyi/fastparse",
)
GOAL = 2.0  # issue 22: disk per repo at most twice its .git


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout.strip()


def source_of(repo: str, mirrors: Path | None) -> str:
    local = mirrors / repo.replace("/", "+") / "repo" if mirrors else None
    return str(local) if local is not None and local.is_dir() else f"https://github.com/{repo}.git"


def measure(repo: str, source: str, work: Path) -> str:
    name = repo.replace("/", "-")
    clone = work / "clones" / name
    git("clone", "-q", "--no-local", source, str(clone))  # the developer's clone: .git + checkout
    git("-C", str(clone), "config", "uploadpack.allowFilter", "true")  # as hosted remotes allow
    commit = git("-C", str(clone), "rev-parse", "HEAD")
    commits = int(git("-C", str(clone), "rev-list", "--count", "HEAD"))
    files = len(git("-C", str(clone), "ls-files").splitlines())
    dot_git = folder_size(clone / ".git")
    checkout = folder_size(clone) - dot_git

    whitelist = work / f"{name}.toml"
    whitelist.write_text(f'[[repo]]\nname = "{name}"\nurl = "{clone}"\n')
    settings = load_settings(env_file=None, data_dir=work / "data" / name, repos_file=whitelist)
    cleaner = BackgroundCleaner()  # as a worker runs it: the spare is linked after the sync
    result = Mirrors(settings, load_whitelist(whitelist), cleaner).sync(name)
    assert result.ok, result.error
    cleaner.wait()
    store = BlobStore(settings.data_dir.resolve())
    repo_folder = settings.data_dir / "repos" / name
    seen: set[tuple[int, int]] = set()  # a snapshot's files are the store's objects: count them once
    objects = folder_size(store.objects, seen)
    database = folder_size(store.folder, seen)
    mirror = folder_size(repo_folder / "mirror.git", seen) + folder_size(repo_folder / "lineage.git", seen)
    rest = folder_size(repo_folder, seen)  # snapshots (folders, spare), indexes, build records, state
    total = objects + database + mirror + rest
    mb = 1e6
    return (
        f"| {repo} | `{commit[:10]}` | {commits:,} | {files:,} | {dot_git / mb:.1f} | {mirror / mb:.1f} | "
        f"{rest / mb:.1f} | {objects / mb:.1f} | {database / mb:.1f} | {total / mb:.1f} | "
        f"**{total / dot_git:.2f}** | {(dot_git + checkout) / dot_git:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("repos", nargs="*", default=list(REPOS), help="owner/name (default: a fixed set)")
    parser.add_argument("--mirrors", type=Path, help="local git mirrors: DIR/owner+name/repo")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="codebot-bench-disk-"))
    try:
        print(f"load: {os.getloadavg()[0]:.2f} (1 min average)\n")
        print(
            "| repo | commit | commits | files | its .git MB | mirror + lineage MB | snapshots, indexes MB "
            f"| store objects MB | store database MB | codebot MB | ÷ .git (goal ≤ {GOAL:g}) "
            "| git clone + checkout ÷ .git |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for repo in options.repos:
            print(measure(repo, source_of(repo, options.mirrors), work), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
