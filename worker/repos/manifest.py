"""A snapshot's list of paths, written when it is built: what tools look up instead of walking.

`<repo>/manifests/<sha>.paths` (beside the symbol index, pruned with it when the snapshot
goes) holds every path the snapshot shows, sorted, with its kind and size: the files and
links `build_snapshot` wrote, never `.git`, a secret file or a path it failed to write. A
snapshot is immutable, so a process reads a manifest once (`load_manifest` keeps the last
few): a missing path's suggestions and a glob listing cost a lookup, not a walk of the tree.
Snapshots built before manifests existed have none; tools then walk, as before.

It also lists the files the snapshot's own ignore files (`.gitignore`, `.ignore`, `.rgignore`)
hide from `search`, found by the build's one `rg --files` walk (worker/repos/search_listing.py),
so that search leaves them out by name (worker/tools/search_scope.py). A manifest written before
that list existed has none (`Manifest.ignored` is None): ripgrep then reads the ignore files.
"""

from __future__ import annotations

import bisect
import functools
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from worker.repos.symbols import index_path

FILE, LINK = "file", "link"
MANIFEST_SUFFIX = ".paths"


class ManifestEntry(NamedTuple):  # a tuple: 100k of them are made in milliseconds
    path: str  # relative, "/"-separated, as written into the snapshot
    kind: str  # FILE or LINK
    size: int  # bytes in git (a link: 0)


@dataclass(frozen=True)
class Manifest:
    entries: tuple[ManifestEntry, ...]  # sorted by path
    ignored: tuple[str, ...] | None = None  # files hidden from search by ignore files; None: unknown
    # raw path of a file, link or folder -> its shown text, for those shown redacted (a name
    # holding a token: worker/repos/shown_paths.py); None: unknown (an older manifest)
    redacted: dict[str, str] | None = None
    _paths: list[str] = field(default_factory=list, repr=False)
    _by_name: dict[str, list[str]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._paths.extend(e.path for e in self.entries)
        for path in self._paths:
            self._by_name.setdefault(path.rsplit("/", 1)[-1], []).append(path)

    def under(self, folder: str) -> Iterator[ManifestEntry]:
        """Every entry below `folder` ("" for the root), in path order: a range, not a scan."""
        if not folder:
            yield from self.entries
            return
        prefix = folder.rstrip("/") + "/"
        at = bisect.bisect_left(self._paths, prefix)
        while at < len(self._paths) and self._paths[at].startswith(prefix):
            yield self.entries[at]
            at += 1

    def named(self, name: str) -> list[str]:
        """Paths whose last part is `name`."""
        return list(self._by_name.get(name, ()))

    def in_folder(self, folder: str, limit: int) -> list[str]:
        """Paths directly in `folder`, at most `limit`."""
        depth = folder.count("/") + 1 if folder else 0
        found = []
        for entry in self.under(folder):
            if entry.path.count("/") == depth:
                found.append(entry.path)
                if len(found) >= limit:
                    break
        return found


def manifest_path(snapshot_root: Path) -> Path:
    """`<repo>/manifests/<sha>.paths` for the snapshot at `<repo>/snapshots/<sha>`."""
    return index_path(snapshot_root).with_suffix(MANIFEST_SUFFIX)


def write_manifest(
    destination: Path,
    entries: Iterable[ManifestEntry],
    ignored: Iterable[str] | None = None,
    redacted: dict[str, str] | None = None,
) -> None:
    """Atomically (write, then rename): a reader sees the whole manifest or none. `ignored`: the
    files search's ignore rules hide (None: not known, ripgrep reads the ignore files);
    `redacted`: the paths shown redacted (None: not known, the tools find them)."""
    rows = [[e.path, e.kind, e.size] for e in sorted(entries, key=lambda e: e.path)]
    record: dict[str, object] = {"format": 1, "entries": rows}
    if ignored is not None:
        record["ignored"] = sorted(ignored)
    if redacted is not None:
        record["redacted"] = dict(sorted(redacted.items()))
    destination.parent.mkdir(parents=True, exist_ok=True)
    tmp = destination.with_name(f".{destination.name}.{os.getpid()}.tmp")
    # ensure_ascii keeps undecodable names (surrogates) loadable
    tmp.write_text(json.dumps(record), encoding="ascii")
    os.replace(tmp, destination)


def load_manifest(snapshot_root: Path) -> Manifest | None:
    """The snapshot's manifest, or None when it was built without one (or it is unreadable)."""
    return read_manifest(manifest_path(snapshot_root))


def read_manifest(path: Path) -> Manifest | None:
    """The manifest file at `path` (a snapshot's, or the one a build wrote beside its index)."""
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return None
    return _load(str(path), stamp)


@functools.lru_cache(maxsize=16)
def _load(path: str, _stamp: int) -> Manifest | None:
    try:
        record = json.loads(Path(path).read_text(encoding="ascii"))
        rows = record["entries"]
        ignored = record.get("ignored")
        redacted = record.get("redacted")
        return Manifest(
            tuple(ManifestEntry(str(p), str(k), int(s)) for p, k, s in rows),
            None if ignored is None else tuple(map(str, ignored)),
            None if redacted is None else {str(p): str(shown) for p, shown in redacted.items()},
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
