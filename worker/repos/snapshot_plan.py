"""What a snapshot will hold, decided from the tree listing before anything is written.

Entries are decided by path: secret file names (`secret_file_globs`) and `.git` are never
materialized; a symlink whose target names a secret file, or leads to one inside the tree, is
left out like that file; a path git should never have stored (`..`, empty parts) is skipped. A
blob secret by lineage (worker/repos/lineage.py) becomes a "withheld" placeholder: never
processed, parsed, searched or read, whatever its name here. A symlink is a blob too (git stores
its target text as one): a link whose blob is secret by lineage, or whose target text holds a
secret or is a credentials file by content, is that placeholder as well, never a link whose
target `list_files` would print.

What a path decides is the same in every commit, so a refresh takes it from the previous
build's record (worker/repos/build_record.py) for the paths that did not change; the lineage
verdict is looked up afresh for every path.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from config.settings import Settings
from worker.repos.blob_process import link_secret
from worker.repos.build_record import HIDDEN, SKIPPED
from worker.repos.disk import human_bytes
from worker.repos.lineage import reason_of
from worker.repos.symbol_grammars import grammar_of
from worker.repos.tree_listing import GITLINK, SYMLINK, TreeEntry
from worker.repos.visible import is_git_dir, secret_path, shown_name

log = logging.getLogger(__name__)

_MAX_LINK_HOPS = 40  # as the kernel's ELOOP limit


class SnapshotRefused(Exception):
    """A commit that may not become a snapshot (over a cap, no disk space); the message says why."""


@dataclass
class Plan:
    files: list[TreeEntry] = field(default_factory=list)
    links: list[TreeEntry] = field(default_factory=list)
    submodules: list[TreeEntry] = field(default_factory=list)
    withheld: list[tuple[TreeEntry, str]] = field(default_factory=list)  # secret by lineage, and why
    by_name: dict[str, str] = field(default_factory=dict)  # path -> HIDDEN or SKIPPED
    hidden: int = 0  # secret names (and links to them): never materialized
    skipped: int = 0  # paths git should never have stored


def _valid(path: str) -> bool:
    parts = path.split("/")
    return all(part not in ("", ".", "..") and not is_git_dir(part) for part in parts)


def by_name(path: str, settings: Settings) -> str | None:
    """SKIPPED, HIDDEN, or None for a path shown (as a file, link, submodule or placeholder)."""
    if not _valid(path):
        return SKIPPED
    return HIDDEN if secret_path(path, settings) is not None else None


def make_plan(
    entries: list[TreeEntry],
    settings: Settings,
    secret: Mapping[str, str],
    decided: Mapping[str, str] | None = None,
    changed: Collection[str] = (),
) -> Plan:
    """`decided`: the previous build's by-name decisions (its paths not in `decided` were
    shown), reused for every path not in `changed`; None: decide every path here."""
    plan = Plan()
    for entry in entries:
        path = entry.path
        hidden = by_name(path, settings) if decided is None or path in changed else decided.get(path)
        if hidden is not None:
            plan.by_name[path] = hidden
        if hidden == SKIPPED:
            plan.skipped += 1
            log.warning("skipped an entry git should never store: %r", shown_name(path))
        elif hidden == HIDDEN:
            plan.hidden += 1
        elif entry.mode != GITLINK and (why := reason_of(secret, entry.sha)) is not None:
            plan.withheld.append((entry, why))  # a placeholder: never processed, parsed or linked
        elif entry.mode == SYMLINK:
            plan.links.append(entry)
        elif entry.mode == GITLINK:
            plan.submodules.append(entry)
        else:
            plan.files.append(entry)
    return plan


def stored_sizes(plan: Plan, settings: Settings) -> dict[str, int]:
    """The blobs of the plan's files that the store keeps (not empty, not over blob_max_bytes)."""
    return {e.sha: e.size for e in plan.files if 0 < e.size <= settings.blob_max_bytes}


def parse_pairs(plan: Plan, sizes: dict[str, int], settings: Settings) -> set[tuple[str, str]]:
    """The (blob, grammar) pairs the symbol index of the plan's files needs parsed."""
    return {
        (e.sha, g)
        for e in plan.files
        if e.sha in sizes and e.size <= settings.symbols_max_file_bytes and (g := grammar_of(e.path))
    }


def check_caps(entries: list[TreeEntry], settings: Settings, name: str) -> None:
    files = len(entries)
    size = sum(entry.size for entry in entries if entry.mode != GITLINK)
    if files > settings.snapshot_max_files:
        raise SnapshotRefused(
            f"the commit of {name} has {files:,} files, more than snapshot_max_files "
            f"({settings.snapshot_max_files:,}; CODEBOT_SNAPSHOT_MAX_FILES); the last good snapshot keeps serving"
        )
    if size > settings.snapshot_max_bytes:
        raise SnapshotRefused(
            f"the commit of {name} holds {human_bytes(size)} in {files:,} files, more than snapshot_max_bytes "
            f"({human_bytes(settings.snapshot_max_bytes)}; CODEBOT_SNAPSHOT_MAX_BYTES); the last good snapshot "
            "keeps serving"
        )


def _resolve(path: str, targets: dict[str, str], depth: int = 0) -> list[str] | None:
    """Where the link at `path` leads inside the tree (its parts), following links on the way;
    None when it leaves the tree, is absolute or loops."""
    target = targets[path]
    if target.startswith("/") or depth > _MAX_LINK_HOPS:
        return None
    parts = path.split("/")[:-1]
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
            continue
        parts.append(part)
        if (joined := "/".join(parts)) in targets:
            resolved = _resolve(joined, targets, depth + 1)
            if resolved is None:
                return None
            parts = resolved
    return parts


def hide_secret_links(plan: Plan, targets: dict[str, str], settings: Settings) -> None:
    """Leave out every link whose target names a secret file, or leads to one inside the tree:
    `list_files` would show the name, and the file behind it is not readable anyway. A link
    whose target text is secret by content is withheld (a placeholder), as a file would be."""
    kept = []
    for link in plan.links:
        if (why := link_secret(os.fsencode(targets.get(link.path, "")))) is not None:
            plan.withheld.append((link, why))
            continue
        target = targets.get(link.path, "")
        named = [part for part in target.split("/") if part not in ("", ".", "..")]
        resolved = _resolve(link.path, targets)
        secret = any(secret_path(part, settings) for part in named) or (
            resolved is not None and resolved and secret_path("/".join(resolved), settings) is not None
        )
        if secret:
            plan.hidden += 1
        else:
            kept.append(link)
    plan.links = kept
