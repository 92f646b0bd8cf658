"""Descent for lineage (worker/repos/lineage.py): the closure along descent edges, and the pairing
of secret blobs in the diffs where git's rename detection gave up.

git pairs a rename with an edit ("inexact" detection) only while a diff's candidate pairs (its
sources: deleted, and with -C modified, files; times its added files) stay within its rename
limit squared (`-l`, `lineage_rename_limit`); past it git skips the pairing with no more than a
warning on stderr, and a secret file renamed with an edit in the same commit as a vendor upgrade
would lose its lineage. Such a diff is never taken as "no rename": lineage counts the candidates
of every diff itself, keeps each diff past the limit as a `Suspect` (its source and added blobs),
and pairs every secret source of it with the added blobs of similar content by a comparison of
its own, as git would have (`pair_by_content`). Only secret sources are compared, so the cost is
one read of the added blobs of similar size per secret file such a commit deletes or changes.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from worker.repos.git_objects import ObjectReader

DESCENT = "descent"
SIMILAR = 0.5  # the share of content a pair must have in common: git's own default for -M
# git 2.39: "exhaustive rename detection was skipped due to too many files."; later: "inexact …"
SKIPPED_WARNING = "rename detection was skipped due to too many files"
_PIECE = re.compile(rb"[^\n]{1,64}\n?|\n")  # a line, cut every 64 bytes as git's similarity does
_READ_AT_ONCE = 200  # added blobs held in memory at once while compared


@dataclass(frozen=True)
class Suspect:
    """One diff (a commit against one parent) with more rename candidates than the limit allows:
    git may have paired none of its edited renames."""

    sources: tuple[str, ...]  # the blobs it deleted or changed (their old versions)
    added: tuple[str, ...]  # the blobs it added

    def encoded(self) -> str:
        return "?" + ",".join(self.sources) + ">" + ",".join(self.added)

    @staticmethod
    def decoded(item: str) -> Suspect | None:
        """A Suspect from `encoded`; None for anything else (damaged, or not one)."""
        if not item.startswith("?"):
            return None
        sources, sep, added = item[1:].partition(">")
        shas = [sources.split(","), added.split(",")]
        if not sep or any(len(sha) != 40 for side in shas for sha in side):
            return None
        return Suspect(tuple(shas[0]), tuple(shas[1]))


def suspect_of(sources: list[str], added: list[str], candidates: int, limit: int) -> Suspect | None:
    """The diff as a Suspect when its candidate pairs pass the limit; None when git paired them.

    `candidates`: the diff's sources times its added files as lineage counts them, which is at
    least what git counts (git leaves the exact renames' sources among its sources with -C, and
    its added files are those no exact rename took: both are still in git's output)."""
    if candidates <= limit * limit or not sources or not added:
        return None
    return Suspect(tuple(sorted(set(sources))), tuple(sorted(set(added))))


def closure(known: Mapping[str, str], edges: list[tuple[str, str]]) -> dict[str, str]:
    """Every blob known secret, and every blob reachable from one along descent edges."""
    following: defaultdict[str, list[str]] = defaultdict(list)
    for old, new in edges:
        following[old].append(new)
    verdict = dict(known)
    todo = list(known)
    while todo:
        for new in following.get(todo.pop(), ()):
            if new not in verdict:
                verdict[new] = DESCENT
                todo.append(new)
    return verdict


def pair_by_content(
    git_dir: Path,
    verdict: dict[str, str],
    edges: list[tuple[str, str]],
    suspects: list[Suspect],
    timeout: float,
    max_bytes: int,
) -> dict[str, str]:
    """`verdict` (closed over `edges`) closed again over the pairs found in the suspect diffs: each
    secret source of a suspect with each of its added blobs of similar content, until no new
    secret source turns up (a blob found secret here may be a source in another suspect)."""
    if not suspects:
        return verdict
    compared: set[tuple[int, str]] = set()
    reader = ObjectReader(git_dir, timeout)
    try:
        while True:
            found: list[tuple[str, str]] = []
            for index, suspect in enumerate(suspects):
                for source in suspect.sources:
                    if source in verdict and (index, source) not in compared:
                        compared.add((index, source))
                        similar = _similar_blobs(reader, source, suspect.added, max_bytes)
                        found += [(source, new) for new in similar]
            if not found:
                return verdict
            edges = [*edges, *found]
            verdict = closure(verdict, edges)
    finally:
        reader.close()


def _similar_blobs(reader: ObjectReader, source: str, added: tuple[str, ...], max_bytes: int) -> list[str]:
    """The blobs of `added` whose content is at least SIMILAR like `source`'s. A blob larger than
    `max_bytes` is not compared (as show and diff do not diff it): a secret file that large is
    past what lineage pairs by content."""
    old = reader.lookup_many([source], max_bytes)[source]
    if old is None or old.data is None:
        return []
    pieces = Counter(_PIECE.findall(old.data))
    sizes = reader.lookup_many(list(added), 0)  # sizes only: a pair too different in size never scores
    close = [sha for sha, blob in sizes.items() if blob is not None and _sizes_close(old.size, blob.size)]
    similar: list[str] = []
    for start in range(0, len(close), _READ_AT_ONCE):
        for sha, blob in reader.lookup_many(close[start : start + _READ_AT_ONCE], max_bytes).items():
            if (
                blob is not None
                and blob.data is not None
                and similarity(pieces, old.size, blob.data) >= SIMILAR
            ):
                similar.append(sha)
    return similar


def _sizes_close(one: int, other: int) -> bool:
    """Whether two sizes allow a SIMILAR pair at all (git skips the others the same way)."""
    larger = max(one, other)
    return larger > 0 and larger - min(one, other) <= larger * (1 - SIMILAR)


def similarity(old_pieces: Counter[bytes], old_size: int, new: bytes) -> float:
    """The share of the larger of two contents that both hold: lines (cut every 64 bytes)
    counted with their bytes, as git's rename score counts them."""
    larger = max(old_size, len(new))
    if larger == 0:
        return 1.0
    new_pieces = Counter(_PIECE.findall(new))
    shared = sum(len(piece) * min(count, new_pieces[piece]) for piece, count in old_pieces.items())
    return shared / larger
