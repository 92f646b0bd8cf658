"""Benchmark code navigation on real third-party code, one package per language.

    .venv/bin/python bench/navigation.py [--cache DIR] [--sync-files 10000] [--languages Go,Rust]
                                         [--mirrors DIR]

Fetches the packages of bench/navigation_sources.py (PyPI sdists, npm packages, Debian binary
and source packages; Scala: a public repository at a pinned commit, from a git mirror given with
--mirrors, else a small registry sample) into a cache folder, then per language:

  files, MB       the package's files of that language (what the index would parse)
  defs            definitions found, through the production path: a git repo of those files
                  synced by Mirrors (blob pool, store, snapshot, index)
  ours / bare     parse throughput in MB/s, in this process, of parse_source (what a blob
                  processor runs: parse, definition patterns, references) against tree-sitter's
                  own parse of the same bytes (the floor); ratio = ours time / bare time (goal <= 2)
  index           the symbol store plus the snapshot's manifest, on disk
  class, function a class-like and a function-like definition found by find_definition, checked
                  against the file's text (the keyword and the name on the lines it gives)
  call site       find_references finding a use of the function-like name in another file,
                  checked against that line's text (the name, not in a comment)

Then (unless --sync-files 0) the first sync of a repo of N Python files against one of N files in
all the languages, of the same size, through Mirrors: what a polyglot repo costs against the
Python one. Prints markdown; bench/RESULTS.md records a run.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tree_sitter

from bench.navigation_sources import SOURCES, Source, fetch_or_fallback
from config.repos import load_whitelist
from config.settings import Settings, load_settings
from worker.repos.blob_worker import _parse as parse_units
from worker.repos.blobstore import BlobStore
from worker.repos.mirrors import Mirrors
from worker.repos.symbol_grammars import GRAMMARS, grammar_of
from worker.repos.symbols import index_path, open_index
from worker.tools import build_registry, make_context

MAX_FILE_BYTES = 1_000_000  # symbols_max_file_bytes' default: what the index would parse
_TYPE_KINDS = (
    "class",
    "struct",
    "interface",
    "trait",
    "enum",
    "object",
    "record",
    "protocol",
    "union",
    "module",
)
_TYPE_WORDS = re.compile(
    r"\b(class|struct|interface|trait|enum|object|record|protocol|union|module|type|typedef|actor)\b"
)
_COMMENT_START = ("#", "//", "/*", "*", "--")
_COMMENT_OF = {"Python": "#", "Ruby": "#", "Shell": "#"}


@dataclass
class Corpus:
    source: Source
    files: dict[str, tuple[str, bytes]]  # path -> (grammar key, bytes)

    @property
    def megabytes(self) -> float:
        return sum(len(data) for _, data in self.files.values()) / 1e6


def git(cwd: Path, *args: str) -> None:
    identity = ["-c", "user.name=bench", "-c", "user.email=bench@codebot.invalid"]
    subprocess.run(["git", *identity, *args], cwd=cwd, check=True, capture_output=True)


def collect(source: Source, root: Path) -> Corpus:
    files: dict[str, tuple[str, bytes]] = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        relative = path.relative_to(root).as_posix()
        key = grammar_of(relative)
        if key in source.grammars and path.stat().st_size <= MAX_FILE_BYTES:
            files[relative] = (key, path.read_bytes())
    return Corpus(source, files)


def throughput(corpus: Corpus, rounds: int = 3) -> tuple[float, float]:
    """(bare parse seconds, our parse seconds) for the whole corpus, in CPU time of this thread (a
    busy machine's waits do not count): per file, the best of `rounds` runs of each, interleaved.
    Ours is what a blob processor runs per blob (worker/repos/blob_worker.py `_parse`): the parse,
    the definition patterns, the references, and the rows it sends to the store."""
    bare = ours = 0.0
    for key, data in corpus.files.values():
        best_bare = best_ours = float("inf")
        for _ in range(rounds):
            started = time.thread_time()
            tree_sitter.Parser(GRAMMARS[key].language).parse(data)
            middle = time.thread_time()
            parse_units(data, [key])
            ended = time.thread_time()
            best_bare, best_ours = min(best_bare, middle - started), min(best_ours, ended - middle)
        bare, ours = bare + best_bare, ours + best_ours
    return bare, ours


def make_mirrors(work: Path, name: str, files: dict[str, bytes]) -> tuple[Mirrors, Settings]:
    repo = work / "repo"
    for relative, data in files.items():
        target = repo / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A", "--force")
    git(repo, "commit", "-q", "-m", "corpus")
    (work / "repos.toml").write_text(f'[[repo]]\nname = "{name}"\nurl = "{repo}"\nbranch = "main"\n')
    settings = load_settings(env_file=None, data_dir=work / "data", repos_file=work / "repos.toml")
    return Mirrors(settings, load_whitelist(work / "repos.toml")), settings


def cpu_seconds() -> float:
    """CPU time of this process, of its waited-for children (git) and of its live descendants:
    the blob processors stay warm between syncs as a worker's do, so they are never waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + _live_descendants_cpu()


def _live_descendants_cpu() -> float:
    """utime + stime of every process below this one, from /proc (Linux)."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        pid = int(stat.parent.name)
        parents[pid], ticks[pid] = int(fields[1]), int(fields[11]) + int(fields[12])
    below, found = {os.getpid()}, True
    while found:
        found = False
        for pid, parent in parents.items():
            if parent in below and pid not in below:
                below.add(pid)
                found = True
    below.discard(os.getpid())
    return sum(ticks[pid] for pid in below) / os.sysconf("SC_CLK_TCK")


def synced(work: Path, name: str, files: dict[str, bytes]) -> tuple[Mirrors, Settings, float, float]:
    """A first sync of a repo of `files`: (mirrors, settings, wall seconds, CPU seconds)."""
    mirrors, settings = make_mirrors(work, name, files)
    started, cpu = time.perf_counter(), cpu_seconds()
    outcome = mirrors.sync(name)
    seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu
    assert outcome.ok, outcome.error
    return mirrors, settings, seconds, cpu


def call(mirrors: Mirrors, settings: Settings, name: str, tool: str, symbol: str) -> dict[str, Any]:
    with mirrors.lease([name]) as snapshots:
        ctx = make_context(settings, snapshots)
        outcome = build_registry().call(ctx, tool, {"symbol": symbol})
    return dict(outcome.data or {})


def lines_of(corpus: Corpus, path: str) -> list[str]:
    return corpus.files[path][1].decode("utf-8", errors="replace").split("\n")


def _word(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])")


def definition_checks(corpus: Corpus, found: dict[str, Any], type_like: bool) -> str | None:
    """'path:line' of the first definition whose text agrees with the index, else None."""
    for d in found.get("definitions", []):
        text = lines_of(corpus, d["path"])
        head = "\n".join(text[d["line"] - 1 : d["line"] + 2])
        # a type's name is on its first line (a C typedef's on its last), a function's near it
        named = text[d["line"] - 1] + "\n" + text[d["end_line"] - 1] if type_like else head
        if not _word(d["name"]).search(named):
            continue
        if type_like and not _TYPE_WORDS.search(text[d["line"] - 1]):
            continue
        if not type_like and "(" not in head and corpus.source.language not in ("Ruby", "Scala", "Kotlin"):
            continue
        return f"{d['path']}:{d['line']}"
    return None


def reference_check(corpus: Corpus, found: dict[str, Any], name: str, defined_in: str) -> str | None:
    for r in found.get("references", []):
        if r["path"] == defined_in.rsplit(":", 1)[0]:
            continue
        line = lines_of(corpus, r["path"])[r["line"] - 1]
        called = corpus.source.language in ("Ruby", "Scala", "Shell") or re.search(
            rf"{re.escape(name)}\s*\(", line
        )
        if _word(name).search(line) and called and not line.lstrip().startswith(_COMMENT_START):
            return f"{r['path']}:{r['line']}"
    return None


def candidates(mirrors: Mirrors, name: str, kinds: tuple[str, ...], limit: int = 25) -> list[str]:
    """Names defined in one file, of these kinds: code before tests, used in other files (up to 3)
    first, then the longest (the most specific) names."""
    snapshot = mirrors.current(name)
    assert snapshot is not None
    index = open_index(snapshot.root)
    try:
        marks = ",".join("?" * len(kinds))
        rows = index.db.execute(
            "SELECT d.name, count(DISTINCT g.path) AS users FROM s.defs d JOIN files f ON f.unit = d.unit "
            "LEFT JOIN s.names n ON n.name = d.name LEFT JOIN s.refs r ON r.name_id = n.id "
            "LEFT JOIN files g ON g.unit = r.unit AND g.path != f.path "
            f"WHERE d.kind IN ({marks}) AND length(d.name) > 3 GROUP BY d.name "
            "HAVING count(DISTINCT f.path) = 1 ORDER BY max(f.is_test), min(users, 3) DESC, length(d.name) DESC, d.name "
            "LIMIT ?",
            (*kinds, limit),
        ).fetchall()
    finally:
        index.close()
    return [row[0] for row in rows]


def navigation_checks(corpus: Corpus, mirrors: Mirrors, settings: Settings, name: str) -> list[str]:
    """[class-like, function-like, call site], each 'path:line' or what failed."""
    results = []
    kinds_by_role = [(_TYPE_KINDS, True), (("function", "method"), False)]
    function_name, function_at = "", ""
    for kinds, type_like in kinds_by_role:
        result = "none found" if corpus.source.language != "Shell" or not type_like else "n/a (no classes)"
        for symbol in candidates(mirrors, name, kinds):
            at = definition_checks(
                corpus, call(mirrors, settings, name, "find_definition", symbol), type_like
            )
            if at is None:
                continue
            if not type_like:
                use = reference_check(
                    corpus, call(mirrors, settings, name, "find_references", symbol), symbol, at
                )
                if use is None:
                    continue
                function_name, function_at = symbol, use
            result = f"`{symbol}` {at}"
            break
        results.append(result)
    results.append(f"`{function_name}` {function_at}" if function_name else "none found")
    return results


def index_bytes(settings: Settings, mirrors: Mirrors, name: str) -> int:
    store = BlobStore(settings.data_dir.resolve())
    snapshot = mirrors.current(name)
    assert snapshot is not None
    parts = [store.db_path, Path(f"{store.db_path}-wal"), index_path(snapshot.root)]
    return sum(p.stat().st_size for p in parts if p.exists())


def count_definitions(mirrors: Mirrors, name: str) -> int:
    snapshot = mirrors.current(name)
    assert snapshot is not None
    index = open_index(snapshot.root)
    try:
        return index.info().definitions
    finally:
        index.close()


def language_row(corpus: Corpus, work: Path, rounds: int) -> str:
    slug = re.sub(r"\W", "", corpus.source.language.lower().replace("+", "p").replace("#", "sharp"))
    bare, ours = throughput(corpus, rounds)
    mirrors, settings, _, _ = synced(work / slug, slug, {p: data for p, (_, data) in corpus.files.items()})
    checks = navigation_checks(corpus, mirrors, settings, slug)
    size = index_bytes(settings, mirrors, slug)
    mb = corpus.megabytes
    ok = "✓" if all(":" in c or c.startswith("n/a") for c in checks) else "✗"
    s = corpus.source
    return (
        f"| {s.language} | {s.registry} {s.package} {s.version[:12]} | {len(corpus.files)} | {mb:.2f} | "
        f"{count_definitions(mirrors, slug):,} | {mb / ours:.1f} | {mb / bare:.1f} | {ours / bare:.2f} | "
        f"{size / 1e6:.2f} MB | {checks[0]} | {checks[1]} | {checks[2]} | {ok} |"
    )


def sample(corpora: list[Corpus], count: int) -> dict[str, bytes]:
    """`count` distinct files drawn in turn from the corpora (each made unique by a comment line)."""
    pools = [[(p, d) for p, (_, d) in c.files.items() if 200 <= len(d) <= 64_000] for c in corpora]
    files: dict[str, bytes] = {}
    for n in range(count):
        corpus_at = n % len(corpora)
        pool = pools[corpus_at]
        path, data = pool[(n // len(corpora)) % len(pool)]
        comment = _COMMENT_OF.get(corpora[corpus_at].source.language, "//")
        stem, _, suffix = path.rpartition(".")
        files[f"d{n // 100:03d}/{n}-{stem.rsplit('/', 1)[-1]}.{suffix}"] = (
            data + f"\n{comment} copy {n}\n".encode()
        )
    return files


def sync_comparison(corpora: list[Corpus], count: int, work: Path, rounds: int) -> list[str]:
    """First syncs of a Python repo and a polyglot one of `count` files each, alternated `rounds`
    times so that a busy machine's changing load falls on both; CPU seconds are the fair measure."""
    python = [c for c in corpora if c.source.language == "Python"]
    rows = [
        "| round | repo | files | MB | first sync (s) | CPU (s) | CPU ms per file | definitions |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    repos = (("Python only", python), (f"{len(corpora)} languages", corpora))
    for round_number in range(1, rounds + 1):
        for label, chosen in repos:
            files = sample(chosen, count)
            slug = "python" if len(chosen) == 1 else "polyglot"
            mirrors, _, seconds, cpu = synced(work / f"sync-{slug}", slug, files)
            mb = sum(len(d) for d in files.values()) / 1e6
            rows.append(
                f"| {round_number} | {label} | {len(files):,} | {mb:.1f} | {seconds:.1f} | {cpu:.1f} | "
                f"{1000 * cpu / len(files):.1f} | {count_definitions(mirrors, slug):,} |"
            )
            print(rows[-1], file=sys.stderr, flush=True)
            shutil.rmtree(work / f"sync-{slug}", ignore_errors=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cache", type=Path, help="download into (and reuse) this folder")
    parser.add_argument(
        "--sync-files", type=int, default=10_000, help="files per repo in the sync comparison; 0: skip"
    )
    parser.add_argument("--languages", default="", help="comma-separated: only these languages")
    parser.add_argument(
        "--mirrors",
        type=Path,
        help="git mirrors (DIR/owner+name/repo) of the sources from a public repository",
    )
    parser.add_argument("--sync-rounds", type=int, default=2, help="times each first sync is measured")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="parses of each file, bare and ours, the best counting (a busy machine: more)",
    )
    parser.add_argument("--no-table", action="store_true", help="only the sync comparison")
    options = parser.parse_args()
    cache = options.cache or Path(tempfile.mkdtemp(prefix="codebot-bench-navigation-cache-"))
    work = Path(tempfile.mkdtemp(prefix="codebot-bench-navigation-"))
    wanted = {w.strip() for w in options.languages.split(",") if w.strip()}
    try:
        chosen = [
            fetch_or_fallback(s, cache, options.mirrors)
            for s in SOURCES
            if not wanted or s.language in wanted
        ]
        corpora = [collect(source, folder) for source, folder in chosen]
        print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}\n")
        if not options.no_table:
            print("| language | package | files | MB | defs | ours MB/s | bare MB/s | ours/bare | index | "
                  "class-like | function-like | call site in another file | ok |")  # fmt: skip
            print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|")
            for corpus in corpora:
                print(language_row(corpus, work, options.rounds), flush=True)
        if options.sync_files:
            print()
            print("\n".join(sync_comparison(corpora, options.sync_files, work, options.sync_rounds)))
        print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if options.cache is None:
            shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, sqlite3.Error) as exc:
        sys.exit(f"bench/navigation.py: {exc}")
