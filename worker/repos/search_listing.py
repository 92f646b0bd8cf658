"""Which of a snapshot's files `search` sees, listed once when the snapshot is built.

A snapshot's own `.gitignore`, `.ignore` and `.rgignore` files hide some tracked files from
`search` (files committed with `git add --force`, generated code, vendored folders). One
`rg --files` walk of the new snapshot, with search's ignore rules (IGNORE_RULES, the flags of
worker/tools/search_command.py), gives both lists a build needs:

- `ignored`: the snapshot's files the walk does not list, the ones its ignore files hide. The
  manifest stores them (worker/repos/manifest.py), and search leaves them out by name instead of
  making ripgrep read the ignore files at every search (worker/tools/search_scope.py).
- `indexable`: the listed files a grammar can parse, the files of the symbol index.

Both are taken from the snapshot's files (the manifest's FILE entries), which never hold `.git`,
a secret file name or a link: `search` excludes those on its own (search_command.exclusion_globs).
What the walk lists depends only on the paths and the ignore files, so a refresh reuses the
previous build's lists when no path was added (or changed kind) and no ignore file changed.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from config.settings import Settings
from worker.repos.build_record import BuildRecord
from worker.repos.ripgrep import find_ripgrep
from worker.repos.symbol_grammars import LANGUAGE_OF_SUFFIX

# What search honours: the snapshot's ignore files (it has no .git, so --no-require-git), and
# nothing above it (the data dir's) or of this machine (global git excludes).
IGNORE_RULES = ["--hidden", "--no-require-git", "--no-ignore-parent", "--no-ignore-global"]
IGNORE_FILES = frozenset({".gitignore", ".ignore", ".rgignore"})  # what decides `ignored`
_PARSED_SUFFIXES = tuple(LANGUAGE_OF_SUFFIX)


@dataclass(frozen=True)
class SearchListing:
    indexable: list[str]  # sorted: listed files of a parsed language
    ignored: list[str]  # sorted: files the snapshot's ignore files hide


def list_searched(root: Path, files: Collection[str], settings: Settings) -> SearchListing:
    """One `rg --files` walk of the snapshot at `root`; `files`: its files (not links)."""
    done = subprocess.run(
        [find_ripgrep(), "--files", "--null", "--no-config", "--no-messages", *IGNORE_RULES],
        cwd=root,
        stdin=subprocess.DEVNULL,  # given no path and a pipe or file on stdin, rg would search stdin
        capture_output=True,
        timeout=settings.search_timeout_seconds * 6,
        env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C.UTF-8"},
    )
    if done.returncode not in (0, 1):  # 1: no file at all
        raise OSError(f"ripgrep could not list the files: {done.stderr.decode(errors='replace')[:300]}")
    listed = {os.fsdecode(path).removeprefix("./") for path in done.stdout.split(b"\0") if path}
    return SearchListing(
        indexable=sorted(p for p in listed if p in files and p.endswith(_PARSED_SUFFIXES)),
        ignored=sorted(p for p in files if p not in listed),
    )


def searched_listing(
    root: Path,
    files: Collection[str],
    settings: Settings,
    record: BuildRecord | None,
    touched: Collection[str],
) -> SearchListing:
    """The previous build's lists when `record` applies (no path was added: the caller passes
    None then) and none of the `touched` paths is an ignore file, else a walk. The reused
    `indexable` is the record's own list (the index writer then updates only changed rows)."""
    if (
        record is not None
        and not record.failed
        and record.indexable is not None
        and record.ignored is not None
        and not any(path.rsplit("/", 1)[-1] in IGNORE_FILES for path in touched)
    ):
        return SearchListing(record.indexable, [p for p in record.ignored if p in files])
    return list_searched(root, files, settings)
