"""Which files of a snapshot a search leaves out by name, read from its manifest: the files too
large to search, and the tracked files that the snapshot's own ignore files hide.

ripgrep can find both itself at every search, but each costs it a pass over the tree: with
`--max-filesize` it stats every file, and with ignore files on it looks for `.gitignore`,
`.ignore` and `.rgignore` in every folder and matches every path against them (together ~4 ms of
a ~16 ms search over the ~2,400 files of the Python standard library, on the 2-core machine of
bench/RESULTS.md). A snapshot is immutable, so its manifest already holds both answers:

- files over `search_max_file_bytes`: the manifest lists every file with its size in git;
- the tracked files its ignore files hide: listed by the snapshot's build, from its one
  `rg --files` walk with search's ignore rules (worker/repos/search_listing.py). A snapshot
  built before that list existed has none: ripgrep then reads the ignore files itself.

Either list, when short (at most `MAX_PATH_GLOBS` names a glob can spell exactly), becomes one
`--glob=!/path` per file, given after the model's glob (of two globs matching a file, ripgrep
lets the later decide, so a glob of the model's cannot bring such a file back); a longer list
keeps ripgrep's own checks. Both ways leave out the same files. The secret-file exclusions never
depend on any of this (worker/tools/search_command.py). What a manifest gives is kept per
snapshot (by the manifest's stamp) in every process, a forked work horse's included.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from pathlib import Path

from worker.repos.manifest import FILE, Manifest, load_manifest, manifest_path

MAX_PATH_GLOBS = 64  # more files to leave out than this: ripgrep's own checks (one pass each)
HONOR_IGNORE_FILES = ["--no-require-git"]  # snapshots have no .git; their .gitignore files apply
SKIP_IGNORE_FILES = ["--no-ignore-vcs", "--no-ignore-dot"]  # what they hide is left out by name
_GLOB_SPECIAL = re.compile(r"([\\*?\[\]{}!#])")
_PLAIN_NAME = re.compile(r"[^\x00-\x1f\x7f\ud800-\udfff]*")  # no control character, no undecodable byte

_lock = threading.Lock()  # searches of a threaded worker share the cache
_known: OrderedDict[tuple[str, int, int], tuple[str, ...]] = OrderedDict()  # (root, stamp, limit)
_KEEP = 32  # snapshots remembered


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


def scope_arguments(root: Path | None, limit: int) -> list[str]:
    """What keeps ripgrep out of the files the snapshot at `root` hides by its ignore files and
    of the files over `limit` bytes (one stat of the manifest per search)."""
    stamp = None if root is None else _manifest_stamp(root)
    if root is None or stamp is None:
        return [*HONOR_IGNORE_FILES, f"--max-filesize={limit}"]
    key = (str(root), stamp, limit)
    with _lock:
        known = _known.get(key)
    if known is None:
        known = _from_manifest(load_manifest(root), limit)
        with _lock:
            _known[key] = known
            while len(_known) > _KEEP:
                _known.popitem(last=False)
    return list(known)


def _from_manifest(manifest: Manifest | None, limit: int) -> tuple[str, ...]:
    if manifest is None:
        return (*HONOR_IGNORE_FILES, f"--max-filesize={limit}")
    ignored = None if manifest.ignored is None else path_globs(list(manifest.ignored))
    large = path_globs([e.path for e in manifest.entries if e.kind == FILE and e.size > limit])
    return (
        *(HONOR_IGNORE_FILES if ignored is None else (*SKIP_IGNORE_FILES, *ignored)),
        *([f"--max-filesize={limit}"] if large is None else large),
    )
