"""The records lineage (worker/repos/lineage.py) keeps in a mirror between syncs, besides the
verdict: the descent edges of a mirror of the whole history, each window commit's names and
edges, and the blobs whose content was judged. Written atomically; the records of 40-hex shas are
gzipped (a third the size: gitleaks/gitleaks's 0.4 MB of edges to 0.13 MB). A record that is
missing or damaged reads as None or empty: the scan then reads the history again."""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from worker.repos.lineage_descent import Suspect

EDGES_FILE = "codebot-lineage-edges"
WINDOW_FILE = "codebot-lineage-window"  # a windowed mirror: each commit's names and edges
CHECKED_FILE = "codebot-lineage-checked"  # blobs whose content was judged: "<sha> 0|1"
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class Found:
    """What some diffs tell lineage: the blobs under a secret name, the descent edges, and the
    diffs past the rename limit (whose secret sources lineage pairs itself)."""

    names: set[str] = field(default_factory=set)
    edges: list[tuple[str, str]] = field(default_factory=list)
    suspects: list[Suspect] = field(default_factory=list)


def write_edges(git_dir: Path, found: Found) -> None:
    lines = [*(f"{old} {new}\n" for old, new in found.edges), *(f"{s.encoded()}\n" for s in found.suspects)]
    write(git_dir / EDGES_FILE, "".join(lines), packed=True)


def read_edges(git_dir: Path) -> Found | None:
    """The descent edges and suspect diffs the last whole-history scan saw; None when they cannot
    be read (then the scan is not incremental: the verdict never rests on edges it lost)."""
    text = read_text(git_dir / EDGES_FILE)
    if text is None:
        return None
    lines = text.split("\n")
    edges = [(line[:40], line[41:81]) for line in lines if len(line) == 81]
    suspects = [suspect for line in lines if (suspect := Suspect.decoded(line)) is not None]
    return Found(edges=edges, suspects=suspects)


def write_window(git_dir: Path, key: str, window: Mapping[str, Found]) -> None:
    lines = [key]
    for commit, found in window.items():
        items = [*sorted(found.names), *(f"{old}>{new}" for old, new in found.edges)]
        lines.append(" ".join([commit, *items, *(suspect.encoded() for suspect in found.suspects)]))
    write(git_dir / WINDOW_FILE, "\n".join(lines) + "\n", packed=True)


def read_window(git_dir: Path, key: str) -> dict[str, Found]:
    lines = (read_text(git_dir / WINDOW_FILE) or "").split("\n")
    if lines[0] != key:
        return {}
    kept: dict[str, Found] = {}
    for line in lines[1:]:
        commit, *items = line.split(" ")
        if len(commit) == 40:
            kept[commit] = Found(
                {item for item in items if len(item) == 40},
                [(item[:40], item[41:]) for item in items if len(item) == 81 and item[40] == ">"],
                [suspect for item in items if (suspect := Suspect.decoded(item)) is not None],
            )
    return kept


def write_checked(git_dir: Path, rules: str, checked: Mapping[str, bool]) -> None:
    lines = [rules, *(f"{sha} {int(secret)}" for sha, secret in sorted(checked.items()))]
    write(git_dir / CHECKED_FILE, "\n".join(lines) + "\n", packed=True)


def read_checked(git_dir: Path, rules: str) -> dict[str, bool]:
    lines = (read_text(git_dir / CHECKED_FILE) or "").split("\n")
    if lines[0] != rules:
        return {}
    return {line[:40]: line[41:] == "1" for line in lines[1:] if len(line) == 42}


def read_text(path: Path) -> str | None:
    """A record as written by `write`, compressed or (from before) plain; None when missing,
    damaged or not ASCII."""
    try:
        data = path.read_bytes()
        return (gzip.decompress(data) if data[:2] == _GZIP_MAGIC else data).decode("ascii")
    except (OSError, EOFError, UnicodeDecodeError, zlib.error, gzip.BadGzipFile):
        return None


def write(path: Path, text: str, packed: bool = False) -> None:
    """Atomically. `packed`: gzipped (the verdict itself stays plain text)."""
    data = text.encode("ascii")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(gzip.compress(data, compresslevel=6, mtime=0) if packed else data)
    os.replace(tmp, path)
