"""blame, show and diff: who last changed lines, one commit, and what changed between two versions.

The same rules as the code tools: only repos in scope, paths checked as for read_file (no `..`,
no `.git`, no secret file name, in any commit), every git command bounded in time and output
and run in a safe environment (worker/repos/git_read.py), every result redacted and capped.
File content only ever comes from versions processed as a snapshot's files are
(worker/tools/history_diff.py); blame shows the snapshot's own (redacted) lines. Refs and
authors: worker/tools/history_refs.py; `log`: worker/tools/history_log.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.repos.diff_parse import diff_args, parse_diff
from worker.repos.git_objects import ObjectReader
from worker.repos.git_read import GitReadError, run_git, shallow_edge
from worker.repos.history import Commit, blame_args, parse_blame
from worker.repos.snapshot import Snapshot
from worker.repos.visible import shown_name
from worker.tools.context import ToolContext, ToolError
from worker.tools.files import cached_lines, placeholder_of
from worker.tools.history_diff import render_changes
from worker.tools.history_log import log
from worker.tools.history_refs import SHORT, day, git, history_path, mirror, resolve_ref, shown_person, when
from worker.tools.paths import not_found, resolve_path
from worker.tools.redact import finish
from worker.tools.registry import ToolResult

__all__ = ["blame", "diff", "log", "show"]


# --- blame -------------------------------------------------------------------------------------


def blame(
    ctx: ToolContext, repo: str, path: str, start_line: int = 1, end_line: int | None = None
) -> ToolResult:
    """Show which commit last changed each line of a file, at the snapshot's commit.

    Line ranges, each with the commit that last changed them (sha, date, author, subject), then
    the lines. For why: call show on the commit.

    Args:
        repo: the repo's name
        path: the file's path relative to the repo root
        start_line: first line, from 1
        end_line: last line (inclusive); omit for as many as one call shows
    """
    settings = ctx.settings
    snapshot, git_dir, _reader = mirror(ctx, repo)
    name = snapshot.repo.name
    absolute, relative = resolve_path(snapshot, path, settings)
    if not relative or absolute.is_dir():
        raise ToolError("give the path of a file; use list_files to see what the repo holds")
    if not absolute.is_file():
        raise not_found(snapshot, relative, settings)
    size = absolute.stat().st_size
    held = placeholder_of(absolute, size)
    if held is not None:
        raise ToolError(
            f"{relative!r} has no lines to blame: it is {held.kind} ({held.reason or 'not text'})"
        )
    if size > settings.read_cache_max_file_bytes:
        raise ToolError(f"{relative!r} is too large to blame; use log with path={relative!r} instead")
    lines = cached_lines(ctx, name, relative, absolute)
    total = len(lines)
    if total == 0:
        raise ToolError(f"{relative!r} is empty: no lines to blame")
    start = max(1, start_line)
    if start > total:
        raise ToolError(f"start_line {start} is past the end: {relative!r} has {total} lines")
    last = min(total, start + settings.read_max_lines - 1, end_line if end_line is not None else total)
    if last < start:
        raise ToolError(f"end_line ({end_line}) is before start_line ({start})")
    real = os.path.relpath(os.path.realpath(absolute), os.path.realpath(snapshot.root)).replace(os.sep, "/")
    parsed = parse_blame(git(ctx, git_dir, blame_args(snapshot.sha, real, start, last)))
    if not parsed.lines:
        raise ToolError(f"git found no lines to blame in {relative!r} {start}-{last}")
    capped = last < (total if end_line is None else min(end_line, total))
    window = _BlameWindow(snapshot, relative, lines, start, last, capped)
    return _blame_result(ctx, window, parsed.lines, parsed.commits)


@dataclass(frozen=True)
class _BlameWindow:
    """The lines of one file that one blame call shows."""

    snapshot: Snapshot
    relative: str
    lines: list[str]  # the whole file's (redacted) lines
    start: int
    last: int
    capped: bool  # read_max_lines ended it before the last line asked for


def _blame_result(
    ctx: ToolContext, window: _BlameWindow, blamed: Iterable[Any], commits: dict[str, dict[str, str]]
) -> ToolResult:
    settings = ctx.settings
    snapshot, relative, last = window.snapshot, window.relative, window.last
    name = snapshot.repo.name
    budget = min(settings.read_max_chars, settings.tool_output_max_chars - 600)
    out = [f"blame of {name}:{shown_name(relative)} lines {window.start}-{last} of {len(window.lines)}, "
           f"at the snapshot's commit {snapshot.sha[:SHORT]}:"]  # fmt: skip
    used = len(out[0])
    shown: list[int] = []
    records: list[dict[str, Any]] = []
    cut_at = None
    for sha, first, final in _ranges(blamed):
        block, record = _range_block(ctx, window, (sha, first, final), commits.get(sha, {}))
        size = sum(len(line) + 1 for line in block)
        if used + size > budget and shown:
            cut_at = first
            break
        out += block
        used += size
        shown += range(first, final + 1)
        ctx.history.add_commits(name, [sha])
        records.append(record)
    if cut_at is not None:
        out.append(f"[capped; call blame with start_line={cut_at} to continue]")
    elif window.capped:
        out.append(
            f"[capped at {settings.read_max_lines} lines; call blame with start_line={last + 1} to continue]"
        )
    ctx.shown.add(name, relative, shown)
    ctx.history.add_lines(name, snapshot.sha, relative, shown)
    data = {"repo": name, "path": relative, "commit": snapshot.sha, "ranges": records}
    return finish(ctx, "\n".join(out), data)


def _ranges(blamed: Iterable[Any]) -> list[tuple[str, int, int]]:
    """Consecutive lines last changed by the same commit, as (sha, first line, last line)."""
    ranges: list[tuple[str, int, int]] = []
    for item in blamed:
        if ranges and ranges[-1][0] == item.sha and ranges[-1][2] == item.final_line - 1:
            ranges[-1] = (item.sha, ranges[-1][1], item.final_line)
        else:
            ranges.append((item.sha, item.final_line, item.final_line))
    return ranges


def _range_block(
    ctx: ToolContext, window: _BlameWindow, span: tuple[str, int, int], info: dict[str, str]
) -> tuple[list[str], dict[str, Any]]:
    """One range as shown (its commit's sha, date, author and subject, then its numbered lines)
    and as data."""
    settings = ctx.settings
    sha, first, final = span
    width = len(str(window.last))
    date = day(int(info["author-time"])) if info.get("author-time", "").isdigit() else "?"
    person = shown_person(ctx, info.get("author", ""), info.get("author-mail", "").strip("<>"))
    subject = ctx.redact(info.get("summary", ""))
    edge = "boundary" in info
    label = f"L{first}-L{final}" if final > first else f"L{first}"
    head = f"{label} · {sha[:SHORT]} · {date} · {person}: {subject}"
    if edge:
        head += " [at the edge of the mirror's history (history_depth): may be older]"
    block = [head]
    for number in range(first, final + 1):
        text = window.lines[number - 1]
        if len(text) > settings.read_max_line_chars:
            text = text[: settings.read_max_line_chars] + f" …[line cut: {len(text):,} chars]"
        block.append(f"  {number:>{width}}│ {text}")
    record = {"sha": sha, "start_line": first, "end_line": final, "date": date, "author": person,
              "subject": subject, "boundary": edge}  # fmt: skip
    return block, record


# --- show and diff -----------------------------------------------------------------------------


def _message_lines(ctx: ToolContext, commit: Commit) -> list[str]:
    message = ctx.redact(commit.message.rstrip())  # whole, so a block spread over lines is caught
    lines = message.split("\n") if message else ["(no message)"]
    limit = ctx.settings.history_message_max_lines
    shown = ["    " + line[: ctx.settings.read_max_line_chars] for line in lines[:limit]]
    if len(lines) > limit:
        shown.append(f"    [… {len(lines) - limit} more line(s) of the message not shown]")
    return shown


def show(ctx: ToolContext, repo: str, sha: str, path: str | None = None) -> ToolResult:
    """Show one commit: its full message, author, date, the files it changed, and its diff.

    A large diff is cut: pass path for one file's changes. Cite lines as the commit left them
    as [repo@sha:path#L12-L20] (the diff's second line-number column).

    Args:
        repo: the repo's name
        sha: the commit: a sha (7 or more hex digits, as log shows it), a tag, or HEAD~N
        path: only this file's or folder's changes
    """
    snapshot, git_dir, reader = mirror(ctx, repo)
    name = snapshot.repo.name
    commit = resolve_ref(ctx, snapshot, git_dir, reader, sha, "sha")
    relative = history_path(ctx, path) if path else None
    shown_author = shown_person(ctx, commit.author.name, commit.author.email)
    lines = [f"commit {commit.sha} of {name}" + (" (a merge)" if len(commit.parents) > 1 else "")]
    lines.append(f"Author: {shown_author}")
    lines.append(f"Date:   {when(commit.author.time, commit.author.tz)}")
    if commit.parents:
        lines.append("Parents: " + " ".join(p[:SHORT] for p in commit.parents))
    lines += ["", *_message_lines(ctx, commit), ""]
    data: dict[str, Any] = {"repo": name, "sha": commit.sha, "author": shown_author, "parents": list(commit.parents),
                            "date": when(commit.author.time, commit.author.tz)}  # fmt: skip
    ctx.history.add_commits(name, [commit.sha])
    if commit.sha in shallow_edge(git_dir):
        lines.append(
            "[this commit is at the edge of the mirror's history (history_depth): its parent was not "
            "fetched, so its changes cannot be shown]"
        )
        return finish(ctx, "\n".join(lines), data)
    base = commit.parents[0] if commit.parents else None
    if len(commit.parents) > 1:
        lines.append(
            f"Changes against the first parent {base[:SHORT] if base else ''} (what the merge brought in):"
        )
    elif relative:
        lines.append(f"Changes to {shown_name(relative)}:")
    return _with_changes(ctx, snapshot, reader, git_dir, lines, data, base, commit.sha, relative)


def diff(ctx: ToolContext, repo: str, from_: str, to: str = "HEAD", path: str | None = None) -> ToolResult:
    """Show what changed between two versions of a repo: the files changed (stat), then the diff.

    A long diff is cut: pass path for one file or folder. Cite lines of the newer version as
    [repo@sha:path#L12-L20] with the sha printed for to.

    Args:
        repo: the repo's name
        from_: the older version: a tag, branch or sha the mirror knows (log lists them), optionally with ~N
        to: the newer version (default HEAD: the snapshot's commit)
        path: only this file's or folder's changes
    """
    snapshot, git_dir, reader = mirror(ctx, repo)
    name = snapshot.repo.name
    old = resolve_ref(ctx, snapshot, git_dir, reader, from_, "from")
    new = resolve_ref(ctx, snapshot, git_dir, reader, to, "to")
    relative = history_path(ctx, path) if path else None
    lines = [
        f"changes in {name}"
        + (f" to {shown_name(relative)}" if relative else "")
        + f" from {from_} ({old.sha[:SHORT]}, {day(old.committer.time)}) to {to} ({new.sha[:SHORT]}, "
        f"{day(new.committer.time)}):",
        f"(cite lines of the newer version as [{name}@{new.sha[:SHORT]}:path#L..])",
    ]
    ctx.history.add_commits(name, [old.sha, new.sha])
    data: dict[str, Any] = {"repo": name, "from": old.sha, "to": new.sha}
    return _with_changes(ctx, snapshot, reader, git_dir, lines, data, old.sha, new.sha, relative)


def _with_changes(
    ctx: ToolContext,
    snapshot: Snapshot,
    reader: ObjectReader,
    git_dir: Path,
    lines: list[str],
    data: dict[str, Any],
    base: str | None,
    target: str,
    relative: str | None,
) -> ToolResult:
    settings = ctx.settings
    try:
        out = run_git(git_dir, diff_args(base, target, relative), ctx.time_left(settings.history_timeout_seconds),
                      settings.history_output_max_bytes)  # fmt: skip
    except GitReadError as exc:
        raise ToolError(f"git could not answer: {exc}") from None
    parsed = parse_diff(out.data, out.cut)
    used = sum(len(line) + 1 for line in lines)
    budget = settings.tool_output_max_chars - 400 - used
    rendered = render_changes(ctx, snapshot.repo.name, reader, parsed, base, target, budget)
    if not parsed.entries and relative:
        rendered.lines = [f"(no change to {shown_name(relative)})"]
    data.update(files=rendered.files, secret_files=rendered.secret_files, cut=rendered.cut or parsed.cut)
    return finish(ctx, "\n".join([*lines, *rendered.lines]), data)
