"""What of the history may be shown: file versions processed as a snapshot's files are, never
a blob secret by lineage.

A diff shown by the history tools is filled with the lines of each file version **processed**
exactly as a snapshot's files are (worker/repos/blob_process.py): the whole version is
redacted, so a secret spread over lines (a private key) is redacted even in a hunk that shows
only its middle, and a version withheld by content (a credentials file) or binary is never
shown. Line counts are kept by processing, so git's line numbers hold. A blob secret by lineage
(worker/repos/lineage.py: a secret file's name in any commit, or descent from one) is withheld in
every commit.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from config.settings import Settings
from worker.repos.blob_process import link_secret, process_blob
from worker.repos.git_objects import GitObject, ObjectReader
from worker.repos.history import ZERO_SHA
from worker.repos.lineage import reason_of, secret_blobs
from worker.repos.placeholders import OVERSIZED, TEXT, WITHHELD
from worker.repos.secrets.redaction import get_redactor

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

    A blob secret by lineage (worker/repos/lineage.py) is withheld in every commit."""
    versions: dict[str, Version] = {}
    secret = secret_blobs(reader.git_dir)
    unread: list[str] = []
    for sha in dict.fromkeys(shas):
        if sha == ZERO_SHA:
            versions[sha] = _EMPTY
        elif secret is None:  # never listed, or the last listing failed: any blob may have been one
            versions[sha] = Version(WITHHELD, 0, reason="the mirror's list of secret files is not ready")
        elif (why := reason_of(secret, sha)) is not None:
            versions[sha] = Version(WITHHELD, 0, reason=why)
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


@dataclass(frozen=True)
class LinkTarget:
    """A symlink blob's target, or why it is withheld (then `target` is None)."""

    target: str | None
    withheld: str | None = None


def link_target(reader: ObjectReader, sha: str) -> LinkTarget:
    """A symlink blob's target (small by nature), withheld as a file of the same blob would be:
    secret by lineage (the link twin of a `.env` is the `.env`'s blob) or by content."""
    if sha == ZERO_SHA:
        return LinkTarget(None)
    secret = secret_blobs(reader.git_dir)
    if secret is None:
        return LinkTarget(None, "the mirror's list of secret files is not ready")
    if (why := reason_of(secret, sha)) is not None:
        return LinkTarget(None, why)
    found = reader.lookup(sha, 4096)
    if found is None or found.data is None:
        return LinkTarget(None)
    if (why := link_secret(found.data)) is not None:
        return LinkTarget(None, why)
    return LinkTarget(found.data.decode("utf-8", "surrogateescape"))
