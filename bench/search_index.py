"""The search index against the plain walk: org-wide search time and index disk ÷ source.

Each top-level package of this venv's site-packages stands in for a repo (its folder for a
snapshot). Per pattern: the plain walk (one `rg` per repo in turn, as search without an index)
against the index path (plan → FTS5 look-up → `rg` restricted by an ignore file, only in repos
with a candidate). Run: `python bench/search_index.py [REPOS]` (default 100).
"""

from __future__ import annotations

import hashlib
import os
import site
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from worker.repos.ripgrep import find_ripgrep
from worker.repos.search_index.planner import fts_expression, plan

PATTERNS = ["def retry", "class \\w+Error", "DeprecationWarning", "import (json|yaml)", "TODO|FIXME",
            "zxqv_never", "__init__", "(?i)sqlite3", "timeout\\s*=", "\\d+\\.\\d+"]  # fmt: skip
FLAGS = ["--null", "--no-heading", "--with-filename", "--line-number", "--color=never", "--no-config",
         "--no-messages", "--hidden", "--no-require-git", "--max-count=1000"]  # fmt: skip


def main(count: int) -> None:
    packages = Path(site.getsitepackages()[0])
    repos = sorted(
        p for p in packages.iterdir() if p.is_dir() and not p.name.endswith(("-info", "__pycache__"))
    )
    repos = repos[:count]
    work = Path(tempfile.mkdtemp(prefix="bench-index-"))
    db = sqlite3.connect(work / "t.sqlite")
    db.execute("CREATE VIRTUAL TABLE grams USING fts5(text, tokenize='trigram', detail=none, content='')")
    db.execute("CREATE TABLE files (repo INTEGER, path TEXT, blob INTEGER)")
    source, seen, started = 0, {}, time.monotonic()
    for number, repo in enumerate(repos):
        for folder, _, names in os.walk(repo):
            for name in names:
                full = Path(folder, name)
                content = full.read_bytes()
                source += len(content)
                digest = hashlib.blake2b(content, digest_size=20).digest()
                if digest not in seen:
                    seen[digest] = len(seen) + 1
                    text = content.replace(b"\0", b"\n").decode("utf-8", "replace")
                    db.execute("INSERT INTO grams (rowid, text) VALUES (?, ?)", (seen[digest], text))
                db.execute(
                    "INSERT INTO files VALUES (?, ?, ?)", (number, str(full.relative_to(repo)), seen[digest])
                )
    db.execute("CREATE INDEX f ON files (blob)")
    db.commit()
    build = time.monotonic() - started
    disk = (work / "t.sqlite").stat().st_size
    print(f"{len(repos)} repos, {source / 1e6:.0f} MB source, index {disk / 1e6:.1f} MB "
          f"({disk / source:.2f}× source), built in {build:.0f} s")  # fmt: skip
    rg = find_ripgrep()
    ratios = []
    for pattern in PATTERNS:
        t0 = time.monotonic()
        for repo in repos:
            subprocess.run(
                [rg, *FLAGS, "-e", pattern], cwd=repo, capture_output=True, stdin=subprocess.DEVNULL
            )
        plain = time.monotonic() - t0
        t0 = time.monotonic()
        query = plan(pattern, ignore_case=False)
        wanted: dict[int, list[str]] = {}
        if query is not None:
            rows = db.execute(
                "SELECT repo, path FROM files WHERE blob IN (SELECT rowid FROM grams WHERE grams MATCH ?)",
                (fts_expression(query),),
            )
            for number, path in rows:
                wanted.setdefault(number, []).append(path)
        for number, repo in enumerate(repos):
            if query is not None and number not in wanted:
                continue
            extra = []
            if query is not None:
                rules = work / "only.ignore"
                rules.write_text("\n".join(["*", "!*/", *("!/" + p for p in wanted[number])]) + "\n")
                extra = [f"--ignore-file={rules}"]
            subprocess.run(
                [rg, *FLAGS, *extra, "-e", pattern], cwd=repo, capture_output=True, stdin=subprocess.DEVNULL
            )
        indexed = time.monotonic() - t0
        ratios.append(plain / indexed)
        narrowed = "narrowed" if query is not None else "NOT narrowed (scan)"
        print(f"{pattern!r:28} plain {plain * 1000:7.0f} ms  index {indexed * 1000:7.0f} ms  "
              f"×{plain / indexed:6.1f}  {narrowed}, {len(wanted)} repos with candidates")  # fmt: skip
    print(f"median speed-up ×{statistics.median(ratios):.1f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
