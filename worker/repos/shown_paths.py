"""Which paths of a snapshot the tools show redacted: a file or folder name that holds a token
(`docs/ghp_….md` is shown `docs/[REDACTED:github-token].md`).

The tools must match globs and path arguments against those shown names, never the raw ones
(worker/tools/visible_paths.py), so the build finds them once and the manifest stores them
(worker/repos/manifest.py). A refresh takes the previous manifest's answer for every path (and
folder) the previous snapshot had, and redacts only the new ones: a name's verdict depends on
the name alone, and a change of the redaction rules makes a new build key (a full build). The
build says which paths differ from the previous snapshot's, so a refresh neither walks the
folders of every path nor redacts any name but those of the changed paths (and their folders).
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable, Mapping

from worker.repos.secrets.redaction import get_redactor
from worker.repos.visible import shown_name


def with_folders(paths: Iterable[str]) -> set[str]:
    """The paths and every folder above them."""
    every: set[str] = set()
    for path in paths:
        parts = path.split("/")
        every.update("/".join(parts[: depth + 1]) for depth in range(len(parts)))
    return every


def redacted_among(paths: Iterable[str]) -> dict[str, str]:
    """raw path -> shown (redacted) path, for the `paths` whose shown text redacts; in one
    redaction of them all (redaction keeps lines, so each path is found again on its line)."""
    ordered = sorted(paths)
    shown = [shown_name(p) for p in ordered]
    if not shown:
        return {}
    lines = get_redactor().redact("\n".join(shown)).split("\n")
    if len(lines) != len(shown):  # never expected: redact each alone
        lines = [get_redactor().redact(s) for s in shown]
    return {raw: line for raw, before, line in zip(ordered, shown, lines, strict=True) if line != before}


def redacted_paths_of(paths: Iterable[str]) -> dict[str, str]:
    """The redacted ones among `paths` and their folders."""
    return redacted_among(with_folders(paths))


def redacted_paths_since(
    paths: Collection[str], previous: Mapping[str, str], changed: Collection[str]
) -> dict[str, str]:
    """What `redacted_paths_of` answers for `paths`, from the previous snapshot's answer and
    `changed`: every path shown now that the previous snapshot did not show as it is (so every
    path and folder it lacked lies on one of them)."""
    shown = set(paths)
    ordered: list[str] = []
    kept: dict[str, str] = {}
    for path, text in previous.items():
        if path not in shown:  # a folder (or a path gone): kept while a path lies below it
            ordered = ordered or sorted(shown)
            below = bisect.bisect_left(ordered, path + "/")
            if below == len(ordered) or not ordered[below].startswith(path + "/"):
                continue
        kept[path] = text
    return {**kept, **redacted_among(with_folders(p for p in changed if p in shown))}
