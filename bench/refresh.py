"""Benchmark snapshots from the processed blob store: first sync, a refresh, disk, worst blobs.

    .venv/bin/python bench/refresh.py [--keep DIR]

The corpus is what every machine with this venv has: the Python standard library's sources
plus this venv's site-packages (without __pycache__), committed into a temp git repo; the
mirrors sync it as they sync any repo (fetch, list the tree, process new blobs in the bounded
pool, link the snapshot, index it). Measured in one run:

  full      the first sync: every blob processed (redacted, classified, parsed), ÷ `git clone`
            of the same repo (with its checkout), measured in the same run
  refresh   a sync after a commit that changes two files, ÷ `git pull` (fetch + checkout) of the
            clone; no lease is held, so the old snapshot is removed as in production (in the
            background: its time is printed on its own line)
  disk      what one more snapshot costs on disk (directories, placeholders, its index), next to
            the processed store itself (objects and symbol rows, shared by all snapshots)
  worst     the slowest single blob of a set of adversarial inputs, processed in-process
            exactly as a processor does (redact, classify, parse)

Prints markdown tables; bench/RESULTS.md records a run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from config.repos import load_whitelist
from config.settings import load_settings
from worker.repos.blob_process import process_blob
from worker.repos.blobstore import BlobStore
from worker.repos.cleanup import BackgroundCleaner
from worker.repos.mirrors import Mirrors
from worker.repos.ref_lines import count_lines
from worker.repos.symbol_grammars import parse_source
from worker.repos.symbols import index_path
from worker.tools.redact import get_redactor

_SKIP = {"__pycache__", "site-packages", "lib-dynload", ".git"}


def git(cwd: Path, *args: str) -> str:
    identity = ["-c", "user.name=bench", "-c", "user.email=bench@codebot.invalid"]
    return subprocess.run(
        ["git", *identity, *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def build_corpus(repo: Path, copies: int = 1) -> int:
    """The corpus, `copies` times over (copy-1/, copy-2/, …: a larger repo of the same blobs)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    site = Path(sysconfig.get_paths()["purelib"])

    def ignore(_folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n in _SKIP or n.startswith("config-3")}

    for copy in range(1, copies + 1):
        base = repo / f"copy-{copy}" if copies > 1 else repo
        shutil.copytree(stdlib, base / "stdlib", symlinks=True, ignore=ignore)
        shutil.copytree(site, base / "site-packages", symlinks=True, ignore=ignore)
    git(repo, "init", "-q", "-b", "main")
    # As GitHub, GitLab and Bitbucket do: a windowed mirror's lineage.git fetches commits and
    # trees only (--filter=blob:none); plain git refuses filters unless told, and then sends
    # every blob (a second copy of the history: docs/repositories.md, "Disk").
    git(repo, "config", "uploadpack.allowFilter", "true")
    git(repo, "add", "-A", "--force")
    git(repo, "commit", "-q", "-m", "corpus")
    git(repo, "repack", "-a", "-d", "-q")  # packed, as a remote's history is
    return int(
        subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True).stdout.count("\n")
    )


def refreshes(
    mirrors: Mirrors,
    cleaner: BackgroundCleaner,
    repo: Path,
    floor: Path,
    targets: list[str],
    leased: bool,
    runs: int,
) -> list[tuple[float, float, float]]:
    """(refresh seconds, git pull seconds, background seconds) of `runs` two-file commits;
    `leased`: a question reads the old snapshot meanwhile (it stays whole; the refresh takes the
    spare apart). The background work (the old snapshot's deletion, the next spare) is waited
    for after each refresh, as minutes pass between refreshes in production."""
    pairs = []
    for run in range(runs):
        for target in targets:
            with open(repo / target, "a", encoding="utf-8") as handle:
                handle.write(f"\n\ndef added_by_the_benchmark_{leased:d}_{run}():\n    return 1\n")
        git(repo, "commit", "-qam", "two files")
        with mirrors.lease(["corpus"]) if leased else contextlib.nullcontext():
            seconds, result = timed(lambda: mirrors.sync("corpus"))
        assert result.ok, result.error  # type: ignore[attr-defined]
        background, _ = timed(cleaner.wait)
        floor_seconds, _ = timed(lambda: git(floor, "pull", "-q", "--ff-only"))
        pairs.append((seconds, floor_seconds, background))
    return pairs


def timed(action: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def _blocks(path: Path) -> int:
    return os.lstat(path).st_blocks * 512


def snapshot_cost(root: Path) -> tuple[int, int]:
    """(bytes a snapshot adds beyond the shared objects, hardlinked files)."""
    own = linked = 0
    for folder, dirs, files in os.walk(root):
        own += sum(_blocks(Path(folder) / d) for d in dirs)
        for name in files:
            stat = os.lstat(Path(folder) / name)
            if stat.st_nlink > 1:
                linked += 1
            else:
                own += stat.st_blocks * 512  # placeholders, empty files, copies
    return own + _blocks(root), linked


def store_tables(db: sqlite3.Connection) -> str:
    """The store database's tables and indexes by size ("refs 12.4 MB, …"), when sqlite has dbstat."""
    try:
        rows = db.execute(
            "SELECT name, sum(pgsize) FROM dbstat GROUP BY name HAVING sum(pgsize) > 100000 ORDER BY 2 DESC"
        ).fetchall()
    except sqlite3.Error:
        return "(this sqlite has no dbstat)"
    return ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in rows)


def folder_size(path: Path, seen: set[tuple[int, int]] | None = None) -> int:
    """Bytes on disk under `path`, each file once however many hardlinks, directories included
    (as `du` counts: a snapshot's own cost is mostly its directories)."""
    seen = set() if seen is None else seen
    total = 0
    for folder, dirs, names in os.walk(path):
        links = [d for d in dirs if os.path.islink(os.path.join(folder, d))]  # not walked into
        for name in [os.curdir, *names, *links]:
            stat = os.lstat(Path(folder) / name)
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_blocks * 512
    return total


def adversarial() -> dict[str, tuple[str, bytes]]:
    """(grammar or "", content) of inputs built to be slow: long lines, dense matches, deep nesting."""
    random = os.urandom
    return {
        "300 kB line of eyJeyJ…": ("", b"eyJ" * 100_000 + b"\n"),
        "1 MB of key=key=…": ("", b"key=" * 250_000),
        "1 MB of BEGIN PRIVATE KEY lines": ("", b"-----BEGIN RSA PRIVATE KEY-----\n" * 32_000),
        "1 MB of password: lines": ("", b"".join(b"password: %07dsecret\n" % i for i in range(40_000))),
        "4 MB base64 in one line": ("", __import__("base64").b64encode(random(3 << 20))),
        "1 MB of ghp_ with no token": ("", b"ghp_" * 250_000),
        "1 MB of ://:@ URL fragments": ("", b"a://b:c@" * 125_000),
        "100k nested brackets (.py)": ("python", b"x = " + b"[" * 100_000 + b"]" * 100_000 + b"\n"),
        "1 MB minified JS line": ("javascript", b"var a=function(b){return b+1};" * 33_000),
    }


def worst_blobs() -> list[tuple[str, int, float]]:
    redactor = get_redactor()
    rows = []
    for label, (grammar, data) in adversarial().items():
        seconds, processed = timed(lambda data=data: process_blob(data, redactor))
        if grammar and processed.kind == "text":  # type: ignore[attr-defined]
            parse, _ = timed(lambda grammar=grammar, data=data: parse_source(grammar, data))
            seconds += parse
        rows.append((label, len(data), seconds))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--keep", type=Path, help="build in this folder and keep it")
    parser.add_argument(
        "--copies", type=int, default=1, help="the corpus this many times over (a larger repo)"
    )
    parser.add_argument("--runs", type=int, default=3, help="refreshes measured each way")
    parser.add_argument("--no-worst", action="store_true", help="skip the adversarial blobs")
    options = parser.parse_args()
    work = options.keep or Path(tempfile.mkdtemp(prefix="codebot-bench-refresh-"))
    try:
        repo = work / "corpus"
        files = build_corpus(repo, options.copies)
        (work / "repos.toml").write_text(f'[[repo]]\nname = "corpus"\nurl = "{repo}"\nbranch = "main"\n')
        settings = load_settings(env_file=None, data_dir=work / "data", repos_file=work / "repos.toml")
        cleaner = BackgroundCleaner()  # as a worker runs it: old snapshots go after the refresh
        mirrors = Mirrors(settings, load_whitelist(work / "repos.toml"), cleaner)

        # Both sides read the corpus from a warm page cache: one clone first, not measured (else
        # whichever runs first pays for reading it from disk).
        git(work, "clone", "-q", "--no-local", str(repo), "warm-up")
        shutil.rmtree(work / "warm-up")
        started, served = time.perf_counter(), []

        def progress(message: str, _fraction: float | None) -> None:
            if message.startswith("indexing the code") and not served:  # the snapshot serves now
                served.append(time.perf_counter() - started)

        full, first = timed(lambda: mirrors.sync("corpus", progress))
        answerable = served[0] if served else full
        assert first.ok, first.error  # type: ignore[attr-defined]
        clone_floor, _ = timed(lambda: git(work, "clone", "-q", "--no-local", str(repo), "floor"))
        one = mirrors.current("corpus")
        assert one is not None
        prefix = "copy-1/" if options.copies > 1 else ""
        targets = [f"{prefix}stdlib/json/decoder.py", f"{prefix}stdlib/textwrap.py"]
        # No lease held: the old snapshot is removed as in production (deferred, then timed).
        cleaner.wait()  # the first sync's background work (its spare)
        idle = refreshes(mirrors, cleaner, repo, work / "floor", targets, False, options.runs)
        busy = refreshes(mirrors, cleaner, repo, work / "floor", targets, True, options.runs)
        cleanup = statistics.median(b for _, _, b in idle + busy)
        two = mirrors.current("corpus")
        assert two is not None
        own, linked = snapshot_cost(two.root)
        manifest = index_path(two.root).stat().st_size
        store = BlobStore(settings.data_dir.resolve())
        with sqlite3.connect(store.db_path) as db:
            counts = {
                t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("blobs", "units", "defs", "refs")
            }
            counts["lines"] = sum(count_lines(lines) for (lines,) in db.execute("SELECT lines FROM refs"))
            tables = store_tables(db)
        objects, store_db = (
            folder_size(store.objects),
            folder_size(store.folder) - folder_size(store.objects),
        )
        seen: set[tuple[int, int]] = set()  # a snapshot's files are the store's objects: count them once
        repo_disk = folder_size(store.folder, seen) + folder_size(
            settings.data_dir / "repos" / "corpus", seen
        )
        repo_folder = settings.data_dir / "repos" / "corpus"
        mirror = folder_size(repo_folder / "mirror.git") + folder_size(repo_folder / "lineage.git")
        kept = sorted(
            "a spare" if p.name.startswith(".spare-") else p.name[:7]
            for p in (repo_folder / "snapshots").iterdir()
            if p.is_dir()
        )
        store_inodes: set[tuple[int, int]] = set()  # what a snapshot links is the store's: not its own
        folder_size(store.objects, store_inodes)
        snapshots = folder_size(repo_folder / "snapshots", store_inodes) + folder_size(
            repo_folder / "manifests"
        )
        checkout = folder_size(work / "floor") - folder_size(work / "floor" / ".git")
        dot_git = folder_size(work / "floor" / ".git")

        print(f"corpus: {files:,} files (stdlib + site-packages), {one.meta.size_bytes / 1e6:.0f} MB; "
              f"{os.cpu_count()} CPUs, blob_workers={settings.blob_workers or os.cpu_count()}\n")  # fmt: skip
        print(f"load: {os.getloadavg()[0]:.2f} (1 min average)\n")
        print("| sync | seconds | git floor | floor seconds | ratio | goal |\n|---|---:|---|---:|---:|---|")
        print(f"| first, until the snapshot serves (every blob redacted) | {answerable:.1f} | git clone (with "
              f"checkout) | {clone_floor:.2f} | {answerable / clone_floor:.1f} | ≤ 5 |")  # fmt: skip
        print(f"| first, until the code index is whole (every file parsed) | {full:.1f} | git clone (with "
              f"checkout) | {clone_floor:.2f} | {full / clone_floor:.1f} | — |")  # fmt: skip
        for label, pairs in (("no question reading the old snapshot", idle), ("a question reading it", busy)):
            seconds = statistics.median(s for s, _, _ in pairs)
            floor_seconds = statistics.median(f for _, f, _ in pairs)
            ratio = statistics.median(s / f for s, f, _ in pairs)
            print(f"| refresh after a 2-file commit, {label} (median of {len(pairs)}) | {seconds:.2f} | "
                  f"git pull (fetch + checkout) | {floor_seconds:.2f} | {ratio:.1f} | ≤ 5 |")  # fmt: skip
        print(
            f"| background after each refresh: old snapshot deleted, next spare linked (median) | {cleanup:.2f} "
            "| — | — | — | off the path |"
        )
        print(f"\ndisk: data of this repo (mirror, snapshot, index, store) {repo_disk / 1e6:.0f} MB ÷ its .git "
              f"{dot_git / 1e6:.0f} MB = {repo_disk / dot_git:.1f} (goal ≤ 2); git's own checkout of it "
              f"{checkout / 1e6:.0f} MB = {checkout / dot_git:.1f} × its .git\n")  # fmt: skip
        print("| what | size |\n|---|---:|")
        print(
            f"| one more snapshot: directories and placeholders ({linked:,} files hardlinked) | {own / 1e6:.1f} MB |"
        )
        print(f"| one more snapshot: its index (path -> parsed unit) | {manifest / 1e6:.2f} MB |")
        print(f"| the bare mirror (mirror.git and lineage.git) | {mirror / 1e6:.0f} MB |")
        print(
            f"| the snapshots kept now ({', '.join(kept)}): folders, indexes, build records, path lists "
            f"| {snapshots / 1e6:.0f} MB |"
        )
        print(f"| the store's objects (redacted text, shared) | {objects / 1e6:.0f} MB |")
        print(
            f"| the store's database ({counts['blobs']:,} blobs, {counts['units']:,} parsed, "
            f"{counts['defs']:,} definitions, {counts['lines']:,} references in {counts['refs']:,} rows) "
            f"| {store_db / 1e6:.0f} MB |"
        )
        print(f"| ↳ by table and index: {tables} | |")
        if not options.no_worst:
            print("\n| adversarial blob | bytes | seconds (redact + classify + parse) |\n|---|---:|---:|")
            rows = worst_blobs()
            for label, size, seconds in rows:
                print(f"| {label} | {size:,} | {seconds:.3f} |")
            print(f"\nworst single blob: {max(s for _, _, s in rows):.3f} s")
        print(f"\none more snapshot: ~{(own + manifest) / files * 100_000 / 1e6:.0f} MB per 100k files")
    finally:
        if not options.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
