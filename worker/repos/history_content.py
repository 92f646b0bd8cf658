"""What of the history may be shown: file versions processed as a snapshot's files are, and the
blobs that were secret files.

A diff shown by the history tools is filled with the lines of each file version **processed**
exactly as a snapshot's files are (worker/repos/blob_process.py): the whole version is
redacted, so a secret spread over lines (a private key) is redacted even in a hunk that shows
only its middle, and a version withheld by content (a credentials file) or binary is never
shown. Line counts are kept by processing, so git's line numbers hold. A blob stored under a
secret file name in any commit of the mirror is withheld in every commit.
"""

from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from config.settings import Settings
from worker.repos.blob_process import process_blob
from worker.repos.git_read import GitObject, GitProcess, GitReadError, ObjectReader
from worker.repos.history import SHA, ZERO_SHA
from worker.repos.placeholders import OVERSIZED, TEXT, WITHHELD
from worker.repos.redaction import get_redactor
from worker.repos.visible import secret_path

# In each mirror: every blob stored under a secret file name anywhere in its history (kept by
# the mirrors at each sync). Such a blob is never shown, whatever name it has in another commit.
SECRET_BLOBS_FILE = "codebot-secret-blobs"


# --- file versions, processed ------------------------------------------------------------------


@dataclass(frozen=True)
class Version:
    """One blob as a snapshot would hold it: redacted text lines, or why it is not shown."""

    kind: str  # text, binary, withheld, oversized, or missing (not in the mirror)
    size: int
    lines: tuple[str, ...] = ()
    reason: str | None = None


_EMPTY = Version(TEXT, 0)
_cache: OrderedDict[str, Version] = OrderedDict()
_cache_lock = threading.Lock()
_CACHE_MAX_BYTES = 32 << 20
_cache_bytes = [0]


def processed_versions(reader: ObjectReader, shas: Iterable[str], settings: Settings) -> dict[str, Version]:
    """Blobs (full shas) processed as for a snapshot, read from the mirror together; cached by sha.

    A blob that was a secret file in any commit of the mirror is withheld in every commit."""
    versions: dict[str, Version] = {}
    secret = secret_blobs(reader.git_dir)
    unread: list[str] = []
    for sha in dict.fromkeys(shas):
        if sha == ZERO_SHA:
            versions[sha] = _EMPTY
        elif secret is None:  # never listed, or the last listing failed: any blob may have been one
            versions[sha] = Version(WITHHELD, 0, reason="the mirror's list of secret files is not ready")
        elif sha in secret:
            versions[sha] = Version(WITHHELD, 0, reason="it is a secret file (by its name) in another commit")
        else:
            with _cache_lock:
                cached = _cache.get(sha)
                if cached is not None:
                    _cache.move_to_end(sha)
                    versions[sha] = cached
                else:
                    unread.append(sha)
    if not unread:
        return versions
    for sha, found in reader.lookup_many(unread, settings.history_diff_max_file_bytes).items():
        version = _processed(found)
        versions[sha] = version
        with _cache_lock:
            _cache[sha] = version
            _cache_bytes[0] += version.size
            while _cache_bytes[0] > _CACHE_MAX_BYTES and len(_cache) > 1:
                _, dropped = _cache.popitem(last=False)
                _cache_bytes[0] -= dropped.size
    return versions


def _processed(found: GitObject | None) -> Version:
    if found is None or found.kind != "blob":
        return Version("missing", 0)
    if found.data is None:
        return Version(OVERSIZED, found.size, reason="larger than history_diff_max_file_bytes")
    processed = process_blob(found.data, get_redactor())
    if processed.kind != TEXT:
        return Version(processed.kind, found.size, reason=processed.reason)
    text = processed.data.decode("utf-8", "replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if "\r" in text:  # rare: only then is each line looked at
        lines = [line.removesuffix("\r") for line in lines]
    return Version(TEXT, found.size, tuple(lines))


def link_target(reader: ObjectReader, sha: str) -> str | None:
    """A symlink blob's target (small by nature), or None."""
    if sha == ZERO_SHA:
        return None
    found = reader.lookup(sha, 4096)
    return None if found is None or found.data is None else found.data.decode("utf-8", "surrogateescape")


# --- blobs that were secret files --------------------------------------------------------------


def secret_blobs(git_dir: Path) -> frozenset[str] | None:
    """The blobs recorded in the mirror's SECRET_BLOBS_FILE; None when there is none (never
    listed, or the last listing failed and removed it): then no blob's content is shown."""
    try:
        stamp = (git_dir / SECRET_BLOBS_FILE).stat().st_mtime_ns
    except OSError:
        return None
    return _read_secret_blobs(git_dir, stamp)[1]


@functools.lru_cache(maxsize=16)
def _read_secret_blobs(git_dir: Path, stamp: int) -> tuple[str, frozenset[str]]:
    """(what was scanned: "<tip> <depth>", the blob shas), read once per version of the file."""
    try:
        lines = (git_dir / SECRET_BLOBS_FILE).read_text(encoding="ascii").split("\n")
    except (OSError, UnicodeDecodeError):
        return "", frozenset()
    return lines[0], frozenset(line for line in lines[1:] if SHA.match(line))


def record_secret_blobs(git_dir: Path, tip: str, depth: str, timeout: float, settings: Settings) -> int:
    """Update SECRET_BLOBS_FILE for a mirror whose branch is now at `tip`, fetched to `depth`.

    Only the new commits are scanned when the last scan was of an ancestor of `tip` at the same
    depth; otherwise the whole history is. Runs under the mirror's refresh lock."""
    path = git_dir / SECRET_BLOBS_FILE
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        stamp = 0
    scanned, known = _read_secret_blobs(git_dir, stamp) if stamp else ("", frozenset())
    old_tip, _, old_depth = scanned.partition(" ")
    if old_tip == tip and old_depth == depth:
        return len(known)
    incremental = bool(old_tip) and old_depth == depth and _is_ancestor(git_dir, old_tip, tip, timeout)
    revs = [tip, f"^{old_tip}"] if incremental else ["--all"]
    found = set(known) if incremental else set()
    args = ["log", "--raw", "--no-renames", "--no-abbrev", "-m", "-z", "--format=%x1e", *revs]
    with GitProcess(git_dir, args, timeout, 1 << 40) as proc:
        found.update(_secret_entries(proc.chunks(), settings))
        proc.finish()
    tmp = path.with_name(f".{SECRET_BLOBS_FILE}.{os.getpid()}.tmp")
    tmp.write_text("\n".join([f"{tip} {depth}", *sorted(found)]) + "\n", encoding="ascii")
    os.replace(tmp, path)
    return len(found)


def _is_ancestor(git_dir: Path, old: str, new: str, timeout: float) -> bool:
    if not SHA.match(old):
        return False
    try:
        with GitProcess(git_dir, ["merge-base", "--is-ancestor", old, new], timeout, 1000) as proc:
            list(proc.chunks())
            proc.finish()
    except GitReadError:
        return False  # not an ancestor (exit 1), or gone (a force push, a trim): scan it all
    return True


def _secret_entries(chunks: Iterable[bytes], settings: Settings) -> set[str]:
    """Blob shas of the raw entries (`--raw --no-renames -z`) whose path is a secret file name."""
    found: set[str] = set()
    pending = b""
    head: list[bytes] | None = None
    for chunk in chunks:
        tokens = (pending + chunk).split(b"\0")
        pending = tokens.pop()
        for token in tokens:
            if head is not None:  # the path of the entry whose head came before
                if secret_path(os.fsdecode(token), settings) is not None:
                    found.update(sha.decode() for sha in head[2:4] if sha.decode() != ZERO_SHA)
                head = None
            elif token.lstrip(b"\n").startswith(b":"):
                head = token.lstrip(b"\n")[1:].split()
    return found
