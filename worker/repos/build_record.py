"""What a snapshot build decided, kept beside the snapshot so that the next build reuses it.

A refresh after a two-file commit must not redo per file what the last build did (issue 22:
refresh cost ∝ change). `manifests/<sha>.build` (kept for the served snapshot only: an older one
still leased by a question keeps its index and path manifest, not its record)
records the tree listing, which paths were hidden by name, the links' targets, what the store
said of each blob and which parsed unit each (blob, grammar) has, and the paths `search` sees
and leaves out (worker/repos/search_listing.py).
The next build of the same repo takes the listing from it plus `git diff-tree` and asks git,
the store and ripgrep only about what changed.

Never reused: the lineage verdict. Which blobs are withheld as secret is decided again for every
path at every build from the new sync's verdict (a set lookup per path), because a commit can
make an old, unchanged blob secret (a copy of it renamed to `.env`).

A record is used only by a build with the same key: the store's generation (the redaction rules
and parsers), the settings that decide a plan (secret file names, size caps, symbol caps) and the
snapshot format. Anything unreadable or of another key means a full build, never a wrong one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
from dataclasses import dataclass, field, replace
from pathlib import Path

from config.settings import Settings
from worker.repos.tree_listing import TreeEntry

log = logging.getLogger(__name__)

RECORD_SUFFIX = ".build"
_FORMAT = 3  # 3: entries pickled as plain tuples
HIDDEN, SKIPPED = "hidden", "skipped"  # a secret file name (or a link to one); a path git should not store


@dataclass
class BuildRecord:
    key: str
    commit: str
    entries: list[TreeEntry]
    by_name: dict[str, str] = field(default_factory=dict)  # path -> HIDDEN or SKIPPED, decided by path
    targets: dict[str, str] = field(default_factory=dict)  # link path -> its target
    infos: dict[str, tuple[str, str | None, int]] = field(default_factory=dict)  # blob -> kind, reason, lines
    units: dict[tuple[str, str], int] = field(default_factory=dict)  # (blob, grammar) -> unit id
    indexable: list[str] | None = None  # what `rg --files` listed for the symbol index
    withheld: frozenset[str] = frozenset()  # paths withheld by lineage
    links: frozenset[str] = frozenset()  # links written (those to secret files are left out)
    failed: frozenset[str] = frozenset()  # paths that could not be written
    ignored: list[str] | None = None  # files the snapshot's ignore files hide from search (None: not known)


def record_key(settings: Settings, generation: str, snapshot_format: int) -> str:
    decided_by = [
        str(_FORMAT),
        str(snapshot_format),
        generation,
        repr(settings.secret_file_globs),
        str(settings.blob_max_bytes),
        str(settings.symbols_max_file_bytes),
        str(settings.symbols_max_files),
    ]
    return hashlib.sha256("\n".join(decided_by).encode()).hexdigest()[:16]


def record_path(index: Path) -> Path:
    """Beside the snapshot's index (`manifests/<sha>.sqlite` -> `manifests/<sha>.build`)."""
    return index.with_suffix(RECORD_SUFFIX)


def save_record(destination: Path, record: BuildRecord) -> None:
    """Atomically; a failure costs the next build its shortcut, never this build."""
    tmp = destination.with_name(f".{destination.name}.{os.getpid()}.tmp")
    # The entries as plain tuples: pickle writes and reads those in C, a NamedTuple per entry not.
    plain = replace(record, entries=[tuple(entry) for entry in record.entries])  # type: ignore[misc]
    try:
        destination.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(pickle.dumps(plain, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(tmp, destination)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        log.warning("could not keep the build record %s: %s", destination.name, exc)


def load_record(source: Path, key: str) -> BuildRecord | None:
    """The record at `source` when it was made with `key`; None otherwise (a full build follows).

    The file is codebot's own, written under the repo's data dir that only codebot writes."""
    try:
        record = pickle.loads(source.read_bytes())
    except FileNotFoundError:
        return None
    except Exception as exc:
        log.warning("ignoring an unreadable build record %s: %s", source.name, exc)
        return None
    if not isinstance(record, BuildRecord) or record.key != key:
        return None
    record.entries = list(map(TreeEntry._make, record.entries))
    return record
