"""How `show` and `diff` present a change: the stat first, then each file's hunks, within a budget.

Every line shown comes from the file version processed as a snapshot's file is
(worker/repos/history_content.py `processed_versions`): redacted as a whole, with its own line numbers;
git contributes only which lines were added, removed or kept. Secret file names (either side of
a rename) are counted, never named; a version withheld by content, binary, too large, or a
symlink naming a secret file is described, never shown. Lines shown are recorded, per commit,
as evidence for `[repo@sha:path#L..]` citations.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from config.settings import Settings
from worker.repos.diff_parse import Hunk, ParsedDiff, Section
from worker.repos.git_objects import ObjectReader
from worker.repos.history import GITLINK, SYMLINK, ZERO_SHA, RawEntry
from worker.repos.history_content import LinkTarget, Version, link_target, processed_versions
from worker.repos.placeholders import BINARY, OVERSIZED, TEXT, WITHHELD
from worker.repos.visible import is_git_dir, secret_path, shown_name
from worker.tools.context import ToolContext
from worker.tools.paths import human_size

_STATUS = {"A": "added", "D": "deleted", "M": "modified", "T": "type changed", "R": "renamed", "C": "copied"}
LINE_LEGEND = "(each line: number before, number after │ +added -removed)"


@dataclass
class Rendered:
    lines: list[str] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)
    secret_files: int = 0
    cut: bool = False  # the budget ended the diff early


def _hidden(entry: RawEntry, ctx: ToolContext, reader: ObjectReader) -> bool:
    """Never named nor shown: a secret file name on either side, a path git should never hold,
    or a symlink whose target names a secret file."""
    for path in {entry.old_path, entry.new_path}:
        parts = path.split("/")
        if secret_path(path, ctx.settings) is not None or any(
            p in ("", ".", "..") or is_git_dir(p) for p in parts
        ):
            return True
    for mode, sha in ((entry.old_mode, entry.old_sha), (entry.new_mode, entry.new_sha)):
        if mode == SYMLINK and sha != ZERO_SHA:
            target = link_target(reader, sha).target or ""
            if secret_path("/".join(p for p in target.split("/") if p not in ("", ".", "..")), ctx.settings):
                return True
    return False


def _name(entry: RawEntry) -> str:
    if entry.old_path != entry.new_path:
        return f"{shown_name(entry.old_path)} → {shown_name(entry.new_path)}"
    return shown_name(entry.new_path)


def _counts(entry: RawEntry) -> str:
    return "binary" if entry.added is None else f"+{entry.added} -{entry.deleted}"


def stat_lines(entries: list[RawEntry], limit: int) -> list[str]:
    width = max((len(_counts(e)) for e in entries[:limit]), default=0)
    lines = [f"  {e.status[:1]}  {_counts(e):<{width}}  {_name(e)}" for e in entries[:limit]]
    if len(entries) > limit:
        lines.append(
            f"  … and {len(entries) - limit} more file(s) (history_stat_max_files); pass path to narrow"
        )
    return lines


def _why_not_shown(version: Version) -> str | None:
    if version.kind == TEXT:
        return None
    if version.kind == WITHHELD:
        return f"withheld: {version.reason or 'it holds credentials'}; its content is never shown"
    if version.kind == BINARY:
        return f"a binary file ({human_size(version.size)}); its content is not shown"
    if version.kind == OVERSIZED:
        return f"too large to diff ({human_size(version.size)}; history_diff_max_file_bytes)"
    return "this version is not in the mirror"


Line = tuple[str, int | None, int | None]  # the text shown, and the old and new numbers it shows


def _hunk_lines(hunk: Hunk, old: Version, new: Version, width: int, max_chars: int) -> list[Line] | None:
    """The hunk's lines filled from the processed versions; None when a number falls outside its
    version (then they are not the versions git diffed, and nothing is shown)."""
    shown: list[Line] = [(f"@@ -{hunk.old_start} +{hunk.new_start} @@", None, None)]
    for sign, old_number, new_number in hunk.lines:
        if sign == "\\":
            continue
        if old_number is not None and not 1 <= old_number <= len(old.lines):
            return None
        if new_number is not None and not 1 <= new_number <= len(new.lines):
            return None
        if new_number is not None:
            text = new.lines[new_number - 1]
        elif old_number is not None:
            text = old.lines[old_number - 1]
        else:
            return None
        if len(text) > max_chars:
            text = text[:max_chars] + f" …[line cut: {len(text):,} chars]"
        left = "" if old_number is None else str(old_number)
        right = "" if new_number is None else str(new_number)
        shown.append((f"{left:>{width}} {right:>{width}} │{sign} {text}", old_number, new_number))
    return shown


def render_changes(
    ctx: ToolContext,
    repo: str,
    reader: ObjectReader,
    parsed: ParsedDiff,
    old_commit: str | None,
    new_commit: str,
    budget: int,
) -> Rendered:
    """The stat, then each shown file's hunks until `budget` characters are used."""
    settings = ctx.settings
    visible = _visible(ctx, reader, parsed)
    out = Rendered(secret_files=len(parsed.entries) - len(visible))
    out.lines += _summary([entry for entry, _ in visible], out.secret_files, parsed.cut, settings)
    if not visible:
        return out
    out.lines += ["", f"Changes {LINE_LEGEND}:"]
    used = sum(len(line) + 1 for line in out.lines)
    versions: dict[str, Version] = {}
    read = 0  # bytes of blobs read: a commit of many large files must not be read whole to show a few
    for number, (entry, section) in enumerate(visible):
        if read > settings.history_output_max_bytes:
            out.lines.append(
                f"[diff cut here: {len(visible) - number} more file(s) not shown (history_output_max_bytes "
                "read); pass path to see one file's changes]"
            )
            out.cut = True
            break
        read += _read_versions(reader, entry, settings, versions)
        block, record = _file_block(ctx, reader, entry, section, parsed.cut, versions)
        size = sum(len(text) + 1 for text, _, _ in block)
        if used + size > budget:
            if number > 0:
                rest = len(visible) - number
                out.lines.append(
                    f"[diff cut here: {rest} more file(s) not shown; pass path to see one file's changes]"
                )
                out.cut = True
                break
            block = _start_of(block, budget - used)  # the first file alone is too long
            out.cut = True
        used += size
        out.lines += [text for text, _, _ in block]
        out.files.append(record)
        _record_evidence(ctx, repo, entry, block, (old_commit, new_commit))
        if out.cut:
            break
    return out


def _visible(
    ctx: ToolContext, reader: ObjectReader, parsed: ParsedDiff
) -> list[tuple[RawEntry, Section | None]]:
    """The changed files that may be named and shown, each with its part of git's diff."""
    return [
        (entry, section)
        for entry, section in zip(parsed.entries, parsed.sections, strict=True)
        if not _hidden(entry, ctx, reader)
    ]


def _summary(entries: list[RawEntry], secret_files: int, cut: bool, settings: Settings) -> list[str]:
    """The stat of the files shown, and what it leaves out: secret files, and git's output cut."""
    added = sum(e.added or 0 for e in entries)
    deleted = sum(e.deleted or 0 for e in entries)
    lines = [f"{len(entries)} file(s) changed, +{added} -{deleted}:"]
    lines += stat_lines(entries, settings.history_stat_max_files)
    if secret_files:
        lines.append(f"  [{secret_files} secret file(s) changed too: never named or shown]")
    if cut:
        lines.append("  [git's output was cut (history_output_max_bytes): later files may be missing]")
    return lines


def _read_versions(
    reader: ObjectReader, entry: RawEntry, settings: Settings, versions: dict[str, Version]
) -> int:
    """Add the file's processed versions to `versions` (a symlink or submodule has none to read);
    the bytes read, which bound how much of a large commit is read."""
    if SYMLINK in (entry.old_mode, entry.new_mode) or GITLINK in (entry.old_mode, entry.new_mode):
        return 0
    fresh = processed_versions(reader, [entry.old_sha, entry.new_sha], settings)
    versions.update(fresh)
    return sum(v.size for v in fresh.values() if v.kind != OVERSIZED)


def _start_of(block: list[Line], room: int) -> list[Line]:
    """As many of a file's first lines as fit in `room` characters, then a note that it is cut."""
    kept = 0
    used = 0
    for text, _, _ in block:
        if used + len(text) + 1 > room:
            break
        used += len(text) + 1
        kept += 1
    return [*block[:kept], ("[this file's diff is cut here: too long for one reply]", None, None)]


def _record_evidence(
    ctx: ToolContext, repo: str, entry: RawEntry, block: list[Line], commits: tuple[str | None, str]
) -> None:
    """The line numbers shown of each side, as evidence for `[repo@sha:path#L..]` citations."""
    old_commit, new_commit = commits
    olds = {old for _, old, _ in block if old is not None}
    news = {new for _, _, new in block if new is not None}
    if old_commit is not None and olds:
        ctx.history.add_lines(repo, old_commit, entry.old_path, olds)
    if news:
        ctx.history.add_lines(repo, new_commit, entry.new_path, news)


def _file_block(
    ctx: ToolContext,
    reader: ObjectReader,
    entry: RawEntry,
    section: Section | None,
    cut: bool,
    versions: dict[str, Version],
) -> tuple[list[Line], dict[str, Any]]:
    settings = ctx.settings
    kind = _STATUS.get(entry.status[:1], entry.status)
    title: Line = (f"── {_name(entry)} ({kind})", None, None)
    record: dict[str, Any] = {"path": entry.new_path, "status": kind, "added": entry.added, "deleted": entry.deleted,
                              "shown": False}  # fmt: skip
    if entry.old_path != entry.new_path:
        record["old_path"] = entry.old_path

    def note(text: str) -> tuple[list[Line], dict[str, Any]]:
        return [title, (text, None, None)], record

    if GITLINK in (entry.old_mode, entry.new_mode):
        return note(f"submodule: commit {entry.old_sha[:10]} → {entry.new_sha[:10]}")
    if SYMLINK in (entry.old_mode, entry.new_mode):
        before = link_target(reader, entry.old_sha) if entry.old_mode == SYMLINK else None
        after = link_target(reader, entry.new_sha) if entry.new_mode == SYMLINK else None
        shown_before = _shown_target(entry.old_path, before, ctx)
        return note(f"symlink: {shown_before} → {_shown_target(entry.new_path, after, ctx)}")
    old, new = versions[entry.old_sha], versions[entry.new_sha]
    for version in (old, new):
        if (why := _why_not_shown(version)) is not None:
            record["reason"] = why
            return note(why)
    if section is None:
        why = "its diff was cut from git's output" if cut else "its diff could not be matched to the file"
        return note(f"[not shown: {why}; pass path to see this file alone]")
    if section.binary:
        return note("git treats this file as binary; its changes are not shown")
    if not section.hunks:
        return note("(no line changed)")
    width = len(str(max(len(old.lines), len(new.lines), 1)))
    block = [title]
    for hunk in section.hunks:
        filled = _hunk_lines(hunk, old, new, width, settings.read_max_line_chars)
        if filled is None:
            return note("[not shown: its lines did not match the file]")
        block += filled
    record["shown"] = True
    return block, record


def _shown_target(path: str, link: LinkTarget | None, ctx: ToolContext) -> str:
    """A symlink's target as list_files shows it: named only when it stays inside the repo and is
    not a secret file (an absolute or escaping target would show a path of the machine), and
    never when its blob is secret (by lineage or content), as a file of that blob would not be."""
    if link is not None and link.withheld is not None:
        return f"(withheld: {link.withheld})"
    target = link.target if link is not None else None
    if not target:
        return "(none)"
    inside = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    if target.startswith("/") or inside == ".." or inside.startswith("../"):
        return "(outside the repo)"
    if secret_path(inside, ctx.settings) is not None:
        return "(a secret file)"
    return shown_name(inside)
