"""`log`: a repo's commits, by path, by date or ref, or by what their message or changes say.

With a query, every commit of the window is a candidate (newest first, at most
history_log_query_max_commits of them): git's own `--grep`, `-S` and `-G` are never used, as
they would pick the candidates from the raw history. A candidate is listed when its *redacted*
message, or its changes in file versions processed as a snapshot's are
(worker/repos/history_content.py), match: which commits match, how many, in what order, and
why a search stopped depend only on redacted text, so no answer differs between a right and a
wrong guess of a redacted value (no oracle), and a secret file's changes never match.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import re2

from worker.repos.git_objects import ObjectReader
from worker.repos.git_read import GitProcess, GitReadError
from worker.repos.history import GITLINK, LOG_FORMAT, SYMLINK, LogParser, LogRecord
from worker.repos.history_content import processed_versions
from worker.repos.placeholders import OVERSIZED, TEXT
from worker.repos.snapshot import Snapshot
from worker.repos.visible import secret_path, shown_name
from worker.tools.context import ToolContext, ToolError
from worker.tools.history_refs import (
    SHORT,
    day,
    depth_note,
    git,
    history_path,
    mirror,
    resolve_ref,
    shown_person,
)
from worker.tools.paths import resolve_path
from worker.tools.redact import finish
from worker.tools.registry import ToolResult

_DATE = re.compile(
    r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?$"
    r"|^\d{1,4} (?:second|minute|hour|day|week|month|year)s? ago$"
)
_MATCHES = ("message", "diff", "both")


def log(
    ctx: ToolContext,
    repo: str,
    path: str | None = None,
    query: str | None = None,
    since: str | None = None,
    until: str | None = None,
    limit: int = 20,
    regex: bool = False,
    match: str = "both",
) -> ToolResult:
    """List a repo's commits, newest first: sha, date, author and subject of each.

    With path, the commits that changed that file or folder; with query, those whose message
    mentions it or whose changes added or removed it ("when did this flag appear?"). The history
    goes back as far as the repo's mirror keeps it.

    Args:
        repo: the repo's name
        path: only commits that changed this file or folder (relative to the repo root)
        query: text to find in commit messages and in the lines commits added or removed
        since: only commits after this: a date ("2024-05-01", "3 months ago"), tag, branch or sha
        until: only commits up to this: a date, tag, branch or sha (default: the snapshot's commit)
        limit: at most this many commits
        regex: true: query is a POSIX extended regex (use [0-9], not \\d); false: plain text
        match: where to look for query: "message", "diff" (the changed lines) or "both"
    """
    settings = ctx.settings
    snapshot, git_dir, reader = mirror(ctx, repo)
    name = snapshot.repo.name
    limit = max(1, min(limit, settings.history_log_max_commits))
    relative = history_path(ctx, path) if path else None
    revs, dates = _window(ctx, snapshot, git_dir, reader, since, until)
    tail = ["--", relative] if relative else []
    if query is None or not query.strip():
        follow = ["--follow"] if relative and _is_snapshot_file(snapshot, relative, ctx) else []
        records, more = _newest(ctx, git_dir, reader, [*follow, *dates, *revs, *tail], limit)
        stopped = None
    else:
        if match not in _MATCHES:
            raise ToolError(f"match must be one of: {', '.join(_MATCHES)} (got {match!r})")
        checker = _QueryCheck(query, regex, settings.pattern_max_chars)
        args = [*checker.scan_args(settings.history_log_query_max_commits), *dates, *revs, *tail]
        hits, more, stopped = _search(ctx, git_dir, args, _Matcher(reader, checker, match), limit)
        records = [(record, " and ".join(sorted(kinds))) for record, kinds in hits]
    ctx.history.add_commits(name, (record.sha for record, _ in records))
    return _log_result(ctx, snapshot, git_dir, reader, records, relative, query, more, stopped, limit)


def _newest(
    ctx: ToolContext, git_dir: Path, reader: ObjectReader, args: list[str], limit: int
) -> tuple[list[tuple[LogRecord, str]], bool]:
    """Without a query: git's log of the window, up to `limit` commits, and whether more exist."""
    data = git(ctx, git_dir, ["log", "-z", LOG_FORMAT, f"-n{limit + 1}", *args])
    parser = LogParser(reader)
    records = [(r, "") for r in [*parser.feed(data), *parser.close()] if r is not None]
    return records[:limit], len(records) > limit


def _log_result(
    ctx: ToolContext,
    snapshot: Snapshot,
    git_dir: Path,
    reader: ObjectReader,
    records: list[tuple[LogRecord, str]],
    relative: str | None,
    query: str | None,
    more: bool,
    stopped: str | None,
    limit: int,
) -> ToolResult:
    name = snapshot.repo.name
    what = f" that changed {shown_name(relative)}" if relative else ""
    if query:
        what += f" matching {query!r}"
    lines = [
        f"{len(records)} commit(s) of {name}{what}, newest first (the snapshot is {snapshot.sha[:SHORT]}):"
    ]
    commits: list[dict[str, Any]] = []
    for record, matched in records:
        author = shown_person(ctx, record.author, record.email)
        subject = ctx.redact(record.subject)
        merge = " (merge)" if len(record.parents) > 1 else ""
        where = f"  [matched in the {matched}]" if matched else ""
        lines.append(f"{record.sha[:SHORT]} {day(record.authored)} {author}: {subject}{merge}{where}")
        commits.append(
            {"sha": record.sha, "date": day(record.authored), "author": author, "subject": subject,
             "parents": list(record.parents), "matched": matched or None}
        )  # fmt: skip
    if not records:
        lines.append("(none)")
    if stopped:
        lines.append(f"[{stopped}; narrow the search with path, since or until]")
    if more:
        lines.append(
            f"[more commits exist: pass a larger limit (at most {ctx.settings.history_log_max_commits}), "
            "or narrow with since/until]"
        )
    elif len(records) < limit and (note := depth_note(ctx, snapshot, git_dir, reader)):
        lines.append(note)
    data = {"repo": name, "path": relative, "query": query, "commits": commits, "more": more}
    return finish(ctx, "\n".join(lines), data)


def _is_snapshot_file(snapshot: Snapshot, relative: str, ctx: ToolContext) -> bool:
    try:
        absolute, _ = resolve_path(snapshot, relative, ctx.settings)
    except ToolError:
        return False
    return absolute.is_file() and not absolute.is_symlink()


def _window(
    ctx: ToolContext,
    snapshot: Snapshot,
    git_dir: Path,
    reader: ObjectReader,
    since: str | None,
    until: str | None,
) -> tuple[list[str], list[str]]:
    """(revisions, date options) for since/until: each a date, or a ref bounding the range."""
    dates: list[str] = []
    start = None
    end = snapshot.sha
    for value, option in ((since, "--since"), (until, "--until")):
        if value is None or not value.strip():
            continue
        text = value.strip()
        if _DATE.match(text):
            dates.append(f"{option}={text}")
            continue
        commit = resolve_ref(ctx, snapshot, git_dir, reader, text, option.removeprefix("--"))
        if option == "--since":
            start = commit.sha
        else:
            end = commit.sha
    return ([f"^{start}", end] if start else [end]), dates


class _QueryCheck:
    """A log query: the git options that find candidates, and the checks on redacted text that
    decide which candidates are shown."""

    def __init__(self, query: str, regex: bool, max_chars: int) -> None:
        if len(query) > max_chars:
            raise ToolError(f"the query is longer than {max_chars} characters; use a shorter one")
        if any(c in query for c in "\0\n\r"):
            raise ToolError("the query must be one line of text")
        self.query = query
        self.regex = regex
        if regex:
            options = re2.Options()
            options.log_errors = False
            options.case_sensitive = False
            try:
                self._pattern: Any = re2.compile(query, options=options)
            except re2.error as exc:
                reason = exc.args[0] if exc.args else exc
                if isinstance(reason, bytes):
                    reason = reason.decode("utf-8", "replace")
                raise ToolError(
                    f"invalid regex {query!r} ({reason}); or pass regex=false to look for plain text"
                ) from None

    @staticmethod
    def scan_args(most: int) -> list[str]:
        """Every commit of the window, newest first, with its files: never git's --grep, -S or
        -G, which would pick the candidates from the raw (unredacted) history."""
        return ["log", "-z", "--raw", "--no-abbrev", "--no-renames", LOG_FORMAT, f"-n{most + 1}"]

    def found_in(self, text: str) -> bool:
        if self.regex:
            return self._pattern.search(text) is not None
        return self.query.lower() in text.lower()

    def message_matches(self, ctx: ToolContext, record: LogRecord) -> bool:
        return self.found_in(ctx.redact(record.message))


class DiffMatch:
    """Whether a candidate's changes match in the processed (redacted) versions of its files.

    File versions are read one file at a time, and at most history_output_max_bytes of them in
    one search: a candidate of many large files is not read whole, and once the budget is spent
    `spent` is set and no candidate matches (the search says it stopped)."""

    def __init__(self, reader: ObjectReader, checker: _QueryCheck) -> None:
        self.reader = reader
        self.checker = checker
        self.read = 0
        self.spent = False

    def __call__(self, ctx: ToolContext, record: LogRecord) -> bool:
        checker = self.checker
        for entry in record.entries:
            if (
                SYMLINK in (entry.old_mode, entry.new_mode)
                or GITLINK in (entry.old_mode, entry.new_mode)
                or secret_path(entry.old_path, ctx.settings)
                or secret_path(entry.new_path, ctx.settings)
            ):
                continue
            if self.read > ctx.settings.history_output_max_bytes:
                self.spent = True
                return False
            versions = processed_versions(self.reader, [entry.old_sha, entry.new_sha], ctx.settings)
            self.read += sum(v.size for v in versions.values() if v.kind != OVERSIZED)
            old, new = versions[entry.old_sha], versions[entry.new_sha]
            if old.kind != TEXT or new.kind != TEXT:
                continue
            if checker.regex:
                before, after = Counter(old.lines), Counter(new.lines)
                changed = [*(after - before), *(before - after)]
                if any(checker.found_in(line) for line in changed):
                    return True
            elif "\n".join(old.lines).count(checker.query) != "\n".join(new.lines).count(checker.query):
                return True
        return False


class _Matcher:
    """Where a candidate matches (message, diff), tested on its redacted message and processed
    file versions only."""

    def __init__(self, reader: ObjectReader, checker: _QueryCheck, match: str) -> None:
        self.checker = checker
        self.match = match
        self.diff = DiffMatch(reader, checker)

    def __call__(self, ctx: ToolContext, record: LogRecord) -> set[str]:
        kinds = set()
        if self.match in ("message", "both") and self.checker.message_matches(ctx, record):
            kinds.add("message")
        if self.match in ("diff", "both") and not self.diff.spent and self.diff(ctx, record):
            kinds.add("diff")
        return kinds


def _search(
    ctx: ToolContext, git_dir: Path, args: list[str], matcher: _Matcher, limit: int
) -> tuple[list[tuple[LogRecord, set[str]]], bool, str | None]:
    """Enumerate the window's commits (bounded: history_log_query_max_commits, the output cap,
    the timeout, history_output_max_bytes of file versions), keep those that match on processed
    text; stop at limit + 1. (kept, more, why the search stopped early)."""
    settings = ctx.settings
    most = settings.history_log_query_max_commits
    kept: list[tuple[LogRecord, set[str]]] = []
    parser = LogParser(matcher.diff.reader)
    spent = "the search stopped after reading history_output_max_bytes of file versions"
    parsed = 0

    def test(records: list[LogRecord]) -> None:
        """Test in order, and stop where a bound is reached: the answer never depends on how
        git's output happened to be cut into chunks."""
        nonlocal parsed
        for record in records:
            if len(kept) > limit or matcher.diff.spent:
                return
            parsed += 1
            if parsed <= most and (kinds := matcher(ctx, record)):
                kept.append((record, kinds))

    timeout = ctx.time_left(settings.history_timeout_seconds)
    try:
        with GitProcess(git_dir, args, timeout, settings.history_output_max_bytes) as proc:
            for chunk in proc.chunks():
                test(parser.feed(chunk))
                if len(kept) > limit:
                    return kept[:limit], True, None
                if matcher.diff.spent:
                    return kept[:limit], False, spent
            test(parser.close())
            if matcher.diff.spent:
                return kept[:limit], len(kept) > limit, spent
            try:
                proc.finish()
            except GitReadError as exc:
                if not proc.timed_out():
                    raise ToolError(f"git could not answer: {exc}") from None
                return kept[:limit], False, f"the search stopped after {timeout:.3g} s"
            if proc.cut:
                return kept[:limit], len(kept) > limit, "the search stopped at history_output_max_bytes"
            if parsed > most and len(kept) <= limit:
                return kept, False, f"the search looked at the newest {most:,} commits only"
    except GitReadError as exc:
        raise ToolError(f"git could not answer: {exc}") from None
    return kept[:limit], len(kept) > limit, None
