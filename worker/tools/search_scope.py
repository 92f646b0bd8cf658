"""Which files of a snapshot a search leaves out by name, learnt once per snapshot: the files too
large to search, and the tracked files that the snapshot's own ignore files hide.

ripgrep can find both itself at every search, but each costs it a pass over the tree: with
`--max-filesize` it stats every file, and with ignore files on it looks for `.gitignore`,
`.ignore` and `.rgignore` in every folder and matches every path against them (together ~4 ms of
a ~16 ms search over the ~2,400 files of the Python standard library, on the 2-core machine of
bench/RESULTS.md). A snapshot is immutable, so the answers are the same at every search:

- files over `search_max_file_bytes` (their size in git) come from the snapshot's manifest;
- the tracked files its ignore files hide are the manifest's files that `rg --files`, with the
  same ignore rules, does not list: one walk per snapshot, in a background thread, the first
  time a search meets the snapshot (meanwhile, and whenever the answer is not known, ripgrep
  reads the ignore files itself, as before).

Either list, when short (at most `MAX_PATH_GLOBS` names a glob can spell exactly), becomes one
`--glob=!/path` per file, given after the model's glob (of two globs matching a file, ripgrep
lets the later decide, so a glob of the model's cannot bring such a file back); a longer list
keeps ripgrep's own checks. Both ways leave out the same files. The secret-file exclusions never
depend on any of this (worker/tools/search_command.py).
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import threading
from collections import OrderedDict
from pathlib import Path

from worker.repos.manifest import FILE, load_manifest, manifest_path
from worker.repos.ripgrep import find_ripgrep

log = logging.getLogger("codebot.search")

MAX_PATH_GLOBS = 64  # more files to leave out than this: ripgrep's own checks (one pass each)
LISTING_TIMEOUT_SECONDS = 120.0
HONOR_IGNORE_FILES = ["--no-require-git"]  # snapshots have no .git; their .gitignore files apply
SKIP_IGNORE_FILES = ["--no-ignore-vcs", "--no-ignore-dot"]  # what they hide is left out by name
_IGNORE_AS_SEARCH = [*HONOR_IGNORE_FILES, "--no-ignore-parent", "--no-ignore-global"]  # as ripgrep_command
_GLOB_SPECIAL = re.compile(r"([\\*?\[\]{}!#])")
_PLAIN_NAME = re.compile(r"[^\x00-\x1f\x7f\ud800-\udfff]*")  # no control character, no undecodable byte

_lock = threading.Lock()
_hidden: OrderedDict[tuple[str, int], tuple[str, ...] | None] = OrderedDict()  # by (root, manifest)
_learning: set[tuple[str, int]] = set()
_large: OrderedDict[tuple[str, int, int], tuple[str, ...] | None] = OrderedDict()
_KEEP = 32  # snapshots remembered
_learn_here = True  # False in a process that ends with its question (a forked work horse)


def learn_in_background(allowed: bool) -> None:
    """Whether searches in this process learn what ignore files hide. A forked work horse ends
    with its one question: a walk it started would be lost with it, so there ripgrep keeps
    reading the ignore files itself."""
    global _learn_here
    _learn_here = allowed


def path_globs(paths: list[str]) -> tuple[str, ...] | None:
    """`--glob=!/path` for each path, or None when too many or one a glob cannot spell."""
    if len(paths) > MAX_PATH_GLOBS or not all(map(_globbable, paths)):
        return None
    return tuple("--glob=!/" + _GLOB_SPECIAL.sub(r"\\\1", path) for path in paths)


def _globbable(path: str) -> bool:
    """No control character or undecodable byte, and no trailing space (a gitignore-style
    pattern drops it)."""
    return _PLAIN_NAME.fullmatch(path) is not None and path == path.rstrip()


def _manifest_stamp(root: Path) -> int | None:
    try:
        return manifest_path(root).stat().st_mtime_ns
    except OSError:
        return None


def _remember(cache: OrderedDict, key: object, value: tuple[str, ...] | None) -> None:
    cache[key] = value
    while len(cache) > _KEEP:
        cache.popitem(last=False)


def scope_arguments(root: Path | None, limit: int) -> list[str]:
    """What keeps ripgrep out of the files the snapshot at `root` hides by its ignore files and
    of the files over `limit` bytes (one stat of the manifest per search)."""
    stamp = None if root is None else _manifest_stamp(root)
    if root is None or stamp is None:
        return [*HONOR_IGNORE_FILES, f"--max-filesize={limit}"]
    return [*_ignore_arguments(str(root), stamp), *_size_arguments(root, stamp, limit)]


def _size_arguments(root: Path, stamp: int, limit: int) -> list[str]:
    key = (str(root), stamp, limit)
    with _lock:
        known = _large.get(key, ())
    if known == ():
        manifest = load_manifest(root)
        large = (
            None
            if manifest is None
            else [e.path for e in manifest.entries if e.kind == FILE and e.size > limit]
        )
        known = None if large is None else path_globs(large)
        with _lock:
            _remember(_large, key, known)
    return [f"--max-filesize={limit}"] if known is None else list(known)


def _ignore_arguments(root: str, stamp: int) -> list[str]:
    """By name when what the ignore files hide is known, else read by ripgrep (and, the first
    time, learnt in the background for the next searches)."""
    key = (root, stamp)
    with _lock:
        if key in _hidden:
            known = _hidden[key]
            return HONOR_IGNORE_FILES if known is None else [*SKIP_IGNORE_FILES, *known]
        if key in _learning or not _learn_here:
            return HONOR_IGNORE_FILES
        _learning.add(key)
    threading.Thread(target=_learn, args=(key,), name="codebot-search-scope", daemon=True).start()
    return HONOR_IGNORE_FILES


def hidden_files_known(root: Path) -> bool:
    """Whether the search of this snapshot has learnt what its ignore files hide (or given up)."""
    stamp = _manifest_stamp(root)
    with _lock:
        return stamp is not None and (str(root), stamp) in _hidden


def _learn(key: tuple[str, int]) -> None:
    try:
        known = _hidden_globs(Path(key[0]))
    except Exception:  # never a search's failure: ripgrep keeps reading the ignore files
        log.exception("could not list what the ignore files of %s hide", key[0])
        known = None
    with _lock:
        _remember(_hidden, key, known)
        _learning.discard(key)


def _hidden_globs(root: Path) -> tuple[str, ...] | None:
    manifest = load_manifest(root)
    if manifest is None:
        return None
    done = subprocess.run(
        [find_ripgrep(), "--files", "--null", "--no-config", "--no-messages", "--hidden", *_IGNORE_AS_SEARCH],
        cwd=root,
        stdin=subprocess.DEVNULL,  # given no path and a pipe or file on stdin, rg would search stdin
        capture_output=True,
        timeout=LISTING_TIMEOUT_SECONDS,
        env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C.UTF-8"},
    )
    if done.returncode not in (0, 1):  # 1: no file at all
        return None
    listed = {os.fsdecode(p).removeprefix("./") for p in done.stdout.split(b"\0") if p}
    return path_globs([e.path for e in manifest.entries if e.kind == FILE and e.path not in listed])
