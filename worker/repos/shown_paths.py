"""Which paths of a snapshot the tools show redacted: a file or folder name that holds a token
(`docs/ghp_….md` is shown `docs/[REDACTED:github-token].md`).

The tools must match globs and path arguments against those shown names, never the raw ones
(worker/tools/visible_paths.py), so the build finds them once and the manifest stores them
(worker/repos/manifest.py). A refresh takes the previous manifest's answer for every path (and
folder) the previous snapshot had, and redacts only the new ones: a name's verdict depends on
the name alone, and a change of the redaction rules makes a new build key (a full build).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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


def redacted_paths_of(
    paths: Iterable[str], previous: tuple[Iterable[str], Mapping[str, str]] | None = None
) -> dict[str, str]:
    """The redacted ones among `paths` and their folders; `previous`: the previous snapshot's
    paths and its answer, reused for every path and folder it had."""
    every = with_folders(paths)
    if previous is None:
        return redacted_among(every)
    known = with_folders(previous[0])
    reused = {p: shown for p, shown in previous[1].items() if p in every}
    return {**reused, **redacted_among(every - known)}
