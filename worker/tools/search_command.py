"""The ripgrep command line of one search: our flags, limits and exclusions.

Files larger than `search_max_file_bytes` are not searched. The snapshot's manifest (written
when it was built, worker/repos/manifest.py) holds every file's size in git, so those few files
are left out by name (`--glob=!/path`), found once per snapshot. `--max-filesize` would do the
same by stat-ing every file at every search (~3 ms over the 2,400 files of the Python standard
library on this machine, a fifth of the search); it is kept for a snapshot without a manifest,
or with more large files (or stranger names) than are worth one glob each.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from config.settings import Settings
from worker.repos.manifest import FILE, load_manifest, manifest_path
from worker.repos.ripgrep import RipgrepMissing, find_ripgrep
from worker.tools.context import ToolError

MAX_LARGE_FILE_GLOBS = 64  # more large files than this: ripgrep's --max-filesize stats them all
_GLOB_SPECIAL = re.compile(r"([\\*?\[\]{}!#])")
_PLAIN_NAME = re.compile(r"[^\x00-\x1f\x7f\ud800-\udfff]*")  # no control character, no undecodable byte


def ripgrep_binary() -> str:
    """The `rg` to run; its absence is a tool error the model can work around."""
    try:
        return find_ripgrep()
    except RipgrepMissing as exc:
        raise ToolError(str(exc)) from None


def max_line_bytes(settings: Settings) -> int:
    """The bytes of a matching line ripgrep prints: enough for the characters shown of it."""
    return 4 * settings.search_max_line_chars


def ripgrep_command(
    settings: Settings, pattern: str, glob: str | None, ignore_case: bool, root: Path | None = None
) -> list[str]:
    """The full rg command line for a search in `root` (run there); without `root`, or for a
    snapshot without a manifest, file sizes are checked by ripgrep itself (the bench uses it too)."""
    command = [
        ripgrep_binary(),
        # Plain output, not --json: --json repeats every match of a line (a 1.9 MB line of
        # matches is 100 MB of JSON), while --max-columns bounds each line printed here.
        "--null",  # path NUL line:text — a path may hold any byte but NUL
        "--no-heading",
        "--with-filename",
        "--line-number",
        "--color=never",
        f"--max-columns={max_line_bytes(settings)}",
        "--max-columns-preview",  # a longer line: its start and "[... omitted end of long line]"
        # No file can show more than the count we stop at: rg stops reading it there (else it
        # would search, and buffer the output of, all of a million-line file first).
        f"--max-count={settings.search_count_limit}",
        "--no-config",  # no RIPGREP_CONFIG_PATH can add flags such as --follow
        "--no-messages",  # unreadable files are skipped quietly; fatal errors still print
        "--hidden",  # dotfiles are code too (.github/…); secrets are excluded below
        "--no-require-git",  # snapshots have no .git but their .gitignore files apply
        "--no-ignore-parent",  # ignore files above the snapshot (e.g. the data dir's) do not
        "--no-ignore-global",  # nor does this machine's global git excludes file
    ]
    if ignore_case:
        command.append("--ignore-case")
    command += ["-e", pattern]  # -e: a pattern starting with '-' is not an option
    if glob:
        command.append(f"--glob={glob}")
        # after the matches: "N files searched", to tell a glob that matched no file from no match
        command.append("--stats")
    # after the model's glob: of two --globs that match a file, the later one decides
    command += size_limit(settings, root)
    command += exclusion_globs(tuple(settings.secret_file_globs))
    return command


def size_limit(settings: Settings, root: Path | None) -> list[str]:
    """The arguments that keep ripgrep out of files over `search_max_file_bytes`."""
    fallback = [f"--max-filesize={settings.search_max_file_bytes}"]
    if root is None:
        return fallback
    try:
        stamp = manifest_path(root).stat().st_mtime_ns
    except OSError:
        return fallback
    excluded = _large_file_globs(str(root), stamp, settings.search_max_file_bytes)
    return fallback if excluded is None else list(excluded)


@functools.lru_cache(maxsize=32)
def _large_file_globs(root: str, _stamp: int, limit: int) -> tuple[str, ...] | None:
    """`--glob=!/path` for each file of the snapshot over `limit` bytes in git (None: use
    --max-filesize). The manifest is immutable once written (its mtime is in the key)."""
    manifest = load_manifest(Path(root))
    if manifest is None:
        return None
    large = [e.path for e in manifest.entries if e.kind == FILE and e.size > limit]
    if len(large) > MAX_LARGE_FILE_GLOBS or not all(map(_globbable, large)):
        return None
    return tuple("--glob=!/" + _GLOB_SPECIAL.sub(r"\\\1", path) for path in large)


def _globbable(path: str) -> bool:
    """A name a glob can spell exactly: no control character or undecodable byte, and no
    trailing space (a gitignore-style pattern drops it)."""
    return _PLAIN_NAME.fullmatch(path) is not None and path == path.rstrip()


_GROUPABLE = re.compile(r"[^!/{},\\\[\]][^/{},\\\[\]]*")  # a file-name glob that can sit inside {a,b,…}


@functools.lru_cache(maxsize=8)
def exclusion_globs(secret_globs: tuple[str, ...]) -> list[str]:
    """`.git` and the secret-file globs as --iglob exclusions. The file-name globs go in one
    `{a,b,…}` alternation: ripgrep builds a matcher per glob at every start, and ~30 separate
    case-insensitive globs cost it a few ms per search. A glob with a "/" (anchored to the
    snapshot's root, as gitignore has it) or with characters of the alternation syntax stays
    separate, so that each keeps its meaning."""
    names = [".git", *(glob for glob in secret_globs if _GROUPABLE.fullmatch(glob))]
    rest = [glob for glob in secret_globs if not _GROUPABLE.fullmatch(glob)]
    return ["--iglob=!{" + ",".join(names) + "}", *(f"--iglob=!{glob}" for glob in rest)]
