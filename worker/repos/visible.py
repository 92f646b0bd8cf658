"""What the tools never show: `.git` and secret files (and folders named like them).

One rule for the tools (which refuse them) and for the mirrors (whose snapshot facts count
only what the tools can see), so it lives below both.
"""

from __future__ import annotations

import fnmatch
import functools
import re

from config.settings import Settings


@functools.lru_cache(maxsize=8)
def _secret_matcher(globs: tuple[str, ...]) -> list[tuple[str, re.Pattern[str]]]:
    # Case-insensitive: ".ENV" is a different file from ".env" on Linux but just as secret.
    return [(glob, re.compile(fnmatch.translate(glob), re.IGNORECASE)) for glob in globs]


def secret_glob(name: str, settings: Settings) -> str | None:
    """The secret-file pattern a file or folder name matches, if any."""
    for glob, pattern in _secret_matcher(tuple(settings.secret_file_globs)):
        if pattern.match(name):
            return glob
    return None


def is_git_dir(name: str) -> bool:
    return name.lower() == ".git"


def hidden_name(name: str, settings: Settings) -> bool:
    """Never listed, searched or read: `.git` and secret files (and folders named like them)."""
    return is_git_dir(name) or secret_glob(name, settings) is not None
