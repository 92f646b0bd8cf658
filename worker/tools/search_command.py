"""The ripgrep command line of one search: our flags, limits and exclusions.

Which files are left out by name, because they are too large or because the snapshot's ignore
files hide them, comes from the snapshot's manifest, written when it was built
(worker/tools/search_scope.py).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from config.settings import Settings
from worker.repos.ripgrep import RipgrepMissing, find_ripgrep
from worker.tools.context import ToolError
from worker.tools.search_scope import path_globs, scope_arguments
from worker.tools.visible_paths import redacted_paths


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
    snapshot without a manifest, ripgrep checks sizes and ignore files itself."""
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
        "--no-ignore-parent",  # ignore files above the snapshot (e.g. the data dir's) do not
        "--no-ignore-global",  # nor does this machine's global git excludes file
    ]
    if ignore_case:
        command.append("--ignore-case")
    command += ["-e", pattern]  # -e: a pattern starting with '-' is not an option
    if glob:
        command.append(f"--glob={glob}")
        # after the model's glob, so they decide: ripgrep matches raw names only
        command += redacted_exclusions(root)
        # after the matches: "N files searched", to tell a glob that matched no file from no match
        command.append("--stats")
    # after the model's glob: of two --globs that match a file, the later one decides
    # the snapshot's .gitignore files apply, larger files are left out (search_scope.py)
    command += scope_arguments(root, settings.search_max_file_bytes)
    command += exclusion_globs(tuple(settings.secret_file_globs))
    return command


def redacted_exclusions(root: Path | None) -> list[str]:
    """`--glob=!/path` for every file and folder of the snapshot whose name the tools show
    redacted (worker/tools/visible_paths.py): a search with a glob never searches them, so the
    glob cannot probe the token in their raw names (a right and a wrong guess both find no file)."""
    redacted = redacted_paths(root) if root is not None else None
    if redacted is None or not redacted.outermost:
        return []
    globs = path_globs(list(redacted.outermost))
    if globs is None:
        raise ToolError(
            "a glob cannot be used in this repo (too many file names in it hold secrets); "
            "search it without glob"
        )
    return list(globs)


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
