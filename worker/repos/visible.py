"""What the tools never show: `.git` and secret files (and folders named like them), and how a
name is shown: without control characters.

One rule for the tools (which refuse them) and for the mirrors (which never put them in a
snapshot, and whose snapshot facts count only what the tools can see), so it lives below both.
"""

from __future__ import annotations

import fnmatch
import functools
import re

from config.settings import Settings


@functools.lru_cache(maxsize=8)
def _secret_matcher(globs: tuple[str, ...]) -> list[tuple[str, re.Pattern[str]]]:
    # Case-insensitive: ".ENV" is a different file from ".env" on Linux but just as secret.
    return [(glob, re.compile(fnmatch.translate(glob), re.IGNORECASE)) for glob in globs if "/" not in glob]


@functools.lru_cache(maxsize=8)
def _secret_path_matcher(globs: tuple[str, ...]) -> list[tuple[str, re.Pattern[str]]]:
    """Globs with a "/" (".aws/credentials") match the end of a path, part by part."""
    return [(glob, re.compile(fnmatch.translate(glob), re.IGNORECASE)) for glob in globs if "/" in glob]


@functools.lru_cache(maxsize=8)
def _any_secret_name(globs: tuple[str, ...]) -> re.Pattern[str] | None:
    """All name globs as one pattern: a name that matches none (nearly every one) costs one
    match, not one per glob (a snapshot of 10k files checks every part of every path)."""
    names = [fnmatch.translate(glob) for glob in globs if "/" not in glob]
    return re.compile("|".join(f"(?:{name})" for name in names), re.IGNORECASE) if names else None


def secret_glob(name: str, settings: Settings) -> str | None:
    """The secret-file pattern a file or folder name matches, if any."""
    globs = tuple(settings.secret_file_globs)
    combined = _any_secret_name(globs)
    if combined is None or not combined.match(name):
        return None
    for glob, pattern in _secret_matcher(globs):
        if pattern.match(name):
            return glob
    return None


def secret_path(path: str, settings: Settings) -> str | None:
    """The secret-file pattern a relative path matches (any of its parts, or its tail), if any."""
    parts = [part for part in path.split("/") if part]
    for part in parts:
        if (glob := secret_glob(part, settings)) is not None:
            return glob
    for glob, pattern in _secret_path_matcher(tuple(settings.secret_file_globs)):
        depth = glob.count("/") + 1
        if len(parts) >= depth and pattern.match("/".join(parts[-depth:])):
            return glob
    return None


# Control characters would garble a listing or a chat message (a newline starts a fake line, an
# escape sequence recolours a terminal, a bidi override reverses text): a name is never shown
# with them. C0 controls and DEL become their visible "control pictures" (U+2400…), other
# invisible format characters "⟨U+202E⟩"; `resolve_path` maps both back, so the model can pass a
# name as it was shown.
_FORMAT_CHARS = re.compile(
    "[\u0080-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]"
)
_SHOWN_FORMAT = re.compile("⟨U\\+([0-9A-F]{4})⟩|⟨byte ([0-9A-F]{2})⟩")


def shown_name(name: str) -> str:
    """A file name (or path, or link target) as it may be shown: no control characters."""
    if name.isprintable() and "\u2028" not in name:
        return name
    name = "".join(chr(0x2400 + ord(c)) if ord(c) < 0x20 else "\u2421" if c == "\x7f" else c for c in name)
    name = _FORMAT_CHARS.sub(lambda m: f"⟨U+{ord(m.group(0)):04X}⟩", name)
    # Undecodable bytes (kept as surrogates by os.fsdecode) cannot be printed either.
    return "".join(c if not 0xD800 <= ord(c) <= 0xDFFF else f"⟨byte {ord(c) - 0xDC00:02X}⟩" for c in name)


def unshown(name: str) -> str:
    """The real name behind a name shown by shown_name."""
    name = "".join(
        chr(ord(c) - 0x2400) if 0x2400 <= ord(c) < 0x2420 else "\x7f" if c == "\u2421" else c for c in name
    )
    return _SHOWN_FORMAT.sub(
        lambda m: chr(int(m.group(1), 16)) if m.group(1) else chr(0xDC00 + int(m.group(2), 16)), name
    )


def is_git_dir(name: str) -> bool:
    return name.lower() == ".git"


def hidden_name(name: str, settings: Settings) -> bool:
    """Never listed, searched or read: `.git` and secret files (and folders named like them)."""
    return is_git_dir(name) or secret_glob(name, settings) is not None
