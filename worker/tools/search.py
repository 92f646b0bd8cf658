"""search: the real ripgrep over the snapshots, with our limits and exclusions.

Snapshots hold redacted text only (worker/repos/blob_process.py), so no pattern can match a
secret: a search for a guess of a token finds nothing whether the guess is right or wrong.

ripgrep's default regex engine runs in linear time, so no pattern can hang a worker (PCRE2,
`-P`, is never enabled; this wheel is even built without it). Symlinks are not followed
(no `-L`). Our exclusion globs are `--iglob`s, which ripgrep applies after every `--glob`, so
they win over whatever glob the model passes.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import select
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from worker.repos.snapshot import Snapshot
from worker.repos.visible import shown_name
from worker.tools.context import ToolContext, ToolError
from worker.tools.redact import finish
from worker.tools.registry import ToolResult
from worker.tools.search_command import max_line_bytes, ripgrep_command
from worker.tools.search_command import ripgrep_binary as ripgrep_binary  # the benches' import
from worker.tools.search_indexed import (
    PLACEHOLDER_NOTICE,
    UNNARROWED_NOTE,
    CandidateBatch,
    IndexPlan,
    candidate_batches,
    candidates_only,
    empty_folder,
    index_plan,
)
from worker.tools.visible_paths import shown_glob_matches, shown_order

_LINE_NUMBER = re.compile(rb"(\d+):")
_FILES_SEARCHED = re.compile(rb"(\d+) files searched")
# what rg prints, without a NUL, for a file it stops reading at a NUL byte after a match
_BINARY_WARNING = re.compile(rb".*: WARNING: stopped searching binary file")
# (ripgrep counts the matches left out only when --stats is on)
_PREVIEW_TAIL = re.compile(rb" \[\.\.\. (?:\d+ more matche?s?|omitted end of long line)\]$")
_NO_MATCH_HINT = (
    "Try ignore_case=true, fewer or shorter words, an alternation like 'retry|backoff', "
    "or escape regex characters ( ) [ ] { } . * + ? | with a backslash to match them literally."
)
_REGEX_HINT = (
    "The pattern is a ripgrep (Rust) regex: escape ( ) [ ] { } . * + ? | \\ with a backslash for "
    "literal text; look-around and backreferences are not supported; a match cannot span lines."
)


@dataclass
class _Match:
    repo: str
    path: str
    line: int
    text: str


@dataclass
class _Run:
    """What one search gathered over all repos in scope."""

    shown: list[_Match] = field(default_factory=list)
    total: int = 0
    files_searched: int = 0
    hit_count_limit: bool = False
    timed_out: bool = False
    time_limit: float = 0.0  # seconds this search was allowed
    index: str = "none"  # the search index: "narrowed" the files read, "unnarrowed", or "none"


def _show_line(ctx: ToolContext, raw: bytes) -> str:
    """A matching line as shown: the snapshot is redacted at rest, so only the cut is left to do
    (and finish's filter runs over the whole result anyway). ripgrep printed at most
    `max_line_bytes` of it, then its own preview marker."""
    limit = ctx.settings.search_max_line_chars
    previewed = len(raw) > max_line_bytes(ctx.settings) and _PREVIEW_TAIL.search(raw) is not None
    if previewed:
        raw = raw[: max_line_bytes(ctx.settings)]
    text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
    if previewed:
        return text[:limit] + f" …[line cut: longer than {max_line_bytes(ctx.settings):,} bytes]"
    if len(text) > limit:
        return text[:limit] + f" …[line cut: {len(text):,} chars]"
    return text


_per_thread = threading.local()


def _stderr_file() -> IO[bytes]:
    """This thread's file for rg's stderr, emptied for each search: a file, not a pipe (stderr
    can never block rg), made once per thread rather than per search."""
    errors: IO[bytes] | None = getattr(_per_thread, "errors", None)
    if errors is None:
        errors = _per_thread.errors = tempfile.TemporaryFile()  # noqa: SIM115  # kept open for the thread
    errors.seek(0)
    errors.truncate()
    return errors


@functools.cache
def _devnull() -> int:
    """rg's stdin, opened once per process (Popen's DEVNULL opens and closes it every time)."""
    return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)


def _search_repo(
    ctx: ToolContext,
    snapshot: Snapshot,
    command: list[str],
    run: _Run,
    deadline: float,
    batch: CandidateBatch | None = None,
) -> None:
    """rg in the snapshot; with a `batch`, rg over its paths, each match told to its own repo."""
    if deadline <= time.monotonic():
        run.timed_out = True
        return
    errors = _stderr_file()
    process = subprocess.Popen(
        command,
        cwd=snapshot.root if batch is None else batch.cwd,
        # Not a pipe: given no path, rg searches its stdin when that is a pipe or a file.
        stdin=_devnull(),
        stdout=subprocess.PIPE,
        stderr=errors,
        env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C.UTF-8"},
    )
    try:
        _consume(ctx, snapshot, process, run, deadline, batch)
    finally:
        if process.stdout:
            process.stdout.close()
        if process.poll() is None:
            process.kill()  # enough counted, timed out, or an error: the rest would only cost time
        returncode = process.wait()
    if returncode == 2 and not run.timed_out:
        errors.seek(0)
        message = " ".join(errors.read().decode("utf-8", errors="replace").split())
        if message:
            message = message.removeprefix("rg: ")[:400]
            raise ToolError(f"ripgrep rejected the search: {message}. {_REGEX_HINT}")


def _lines(process: subprocess.Popen[bytes], run: _Run, deadline: float) -> Iterator[bytes]:
    """rg's output lines until it ends or the deadline passes (then run.timed_out is set).

    select() with a timeout instead of a timer thread: starting a thread per search costs
    more than a small search itself. The pieces of a line are kept in a list and joined once
    (never `pending + chunk` per read, which is quadratic in a long line)."""
    if process.stdout is None:  # cannot happen with stdout=PIPE; keeps the types honest
        return
    fd = process.stdout.fileno()
    pieces: list[bytes] = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            run.timed_out = True
            return
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            if pieces:
                yield b"".join(pieces)
            return
        if b"\n" not in chunk:
            pieces.append(chunk)
            continue
        lines = chunk.split(b"\n")
        pieces.append(lines[0])
        yield b"".join(pieces)
        yield from lines[1:-1]
        pieces = [lines[-1]] if lines[-1] else []


def _consume(
    ctx: ToolContext,
    snapshot: Snapshot,
    process: subprocess.Popen[bytes],
    run: _Run,
    deadline: float,
    batch: CandidateBatch | None = None,
) -> None:
    """Records are `path NUL number:text`. A line without a NUL is a piece of a path holding a
    newline (joined to the next record), rg's warning about a binary file, or, at the end,
    its --stats."""
    settings = ctx.settings
    loose: list[bytes] = []
    for raw in _lines(process, run, deadline):
        path, nul, rest = raw.partition(b"\0")
        number = _LINE_NUMBER.match(rest) if nul else None
        if number is None:
            if not _BINARY_WARNING.match(raw) and not (batch and PLACEHOLDER_NOTICE.fullmatch(raw)):
                loose.append(raw)
            continue
        if loose:
            path = b"\n".join([*loose, path])
            loose = []
        run.total += 1
        if len(run.shown) < settings.search_max_results:
            repo, name = (
                (snapshot.repo.name, path.decode("utf-8", "replace")) if batch is None else batch.locate(path)
            )
            text = _show_line(ctx, rest[number.end() :])
            run.shown.append(_Match(repo, name.removeprefix("./"), int(number.group(1)), text))
        if run.total >= settings.search_count_limit:
            run.hit_count_limit = True
            return
    for line in loose:
        searched = _FILES_SEARCHED.fullmatch(line)
        if searched:
            run.files_searched += int(searched.group(1))


def _check_argument(name: str, value: str) -> None:
    """What cannot be passed to ripgrep as a command-line argument."""
    if "\x00" in value:
        hint = "; write \\x00 to match one" if name == "pattern" else ""
        raise ToolError(f"the {name} contains a NUL byte, which ripgrep cannot take{hint}")
    try:
        os.fsencode(value)
    except UnicodeEncodeError:
        raise ToolError(f"the {name} is not valid text (a lone surrogate); send plain text") from None


def search(
    ctx: ToolContext,
    pattern: str,
    repo: str | None = None,
    glob: str | None = None,
    ignore_case: bool = False,
) -> ToolResult:
    """Search the repos' code for a regex (ripgrep): matching lines with paths and line numbers.

    The best first step to find where a function, class, config key or message is. Escape
    ( ) [ ] . * + ? to match them literally; one line at a time (no multi-line matches);
    .gitignored and secret files are skipped. Shows up to 50 matches and how many more exist:
    then narrow with repo, glob or a more specific pattern.

    Args:
        pattern: the regex, e.g. "def (enqueue|schedule)" or "MAX_RETRIES\\s*="
        repo: search only this repo; omit for every repo in scope
        glob: file filter, e.g. "*.py", "src/**", "!tests/**" (a leading ! excludes)
        ignore_case: true to match upper and lower case alike
    """
    glob = _checked_arguments(ctx, pattern, glob)
    snapshots = [ctx.snapshot(repo)] if repo else [ctx.snapshots[name] for name in sorted(ctx.snapshots)]
    if not snapshots:
        raise ToolError("no repo is in scope for this question, so there is nothing to search")
    key = json.dumps(["search", pattern, [s.repo.name for s in snapshots], glob, ignore_case])
    cached = ctx.result_cache.get(key)
    if isinstance(cached, ToolResult):
        return ToolResult("(You already ran this exact search; same result.)\n" + cached.text, cached.data)
    run = _search_snapshots(ctx, snapshots, pattern, glob, ignore_case)
    result = _report(ctx, run, pattern, glob, [s.repo.name for s in snapshots])
    ctx.result_cache[key] = result
    return result


def _checked_arguments(ctx: ToolContext, pattern: str, glob: str | None) -> str | None:
    """The model's pattern and glob refused with a clear message when ripgrep cannot take them;
    the glob to use (a blank one is none)."""
    settings = ctx.settings
    if not pattern:
        raise ToolError("give a pattern to search for, e.g. 'def main' or 'retry|backoff'")
    if len(pattern) > settings.pattern_max_chars:
        raise ToolError(
            f"the pattern is longer than {settings.pattern_max_chars} characters; use a shorter one"
        )
    if glob is not None and not glob.strip():
        glob = None
    _check_argument("pattern", pattern)
    if glob is not None:
        if len(glob) > settings.pattern_max_chars:
            raise ToolError(
                f"the glob is longer than {settings.pattern_max_chars} characters; use a shorter one"
            )
        _check_argument("glob", glob)
    return glob


def _search_snapshots(
    ctx: ToolContext, snapshots: list[Snapshot], pattern: str, glob: str | None, ignore_case: bool
) -> _Run:
    """ripgrep over each snapshot in turn, until enough is counted or the time is up; the search
    index, where there is one, keeps ripgrep to the files that can match (search_indexed.py)."""
    settings = ctx.settings
    run = _Run()
    started = time.monotonic()
    deadline = started + settings.search_timeout_seconds
    if ctx.deadline is not None:  # a search never outlives the question it serves
        deadline = min(deadline, ctx.deadline)
    run.time_limit = max(deadline - started, 0.0)
    index = index_plan(settings, snapshots, pattern, ignore_case, deadline)
    run.index = "narrowed" if index.narrowed else "unnarrowed" if index.used else "none"
    batches, batched = candidate_batches(settings, snapshots, index) if not glob else ([], set())
    for batch in batches:  # one rg for the candidates of many repos (search_indexed.py)
        command = [*ripgrep_command(settings, pattern, None, ignore_case), "--", *batch.paths]
        _search_repo(ctx, snapshots[0], command, run, deadline, batch)
        if run.hit_count_limit or run.timed_out:
            return run
    walked = [s for s in snapshots if not index.skips(s.repo.name) and s.repo.name not in batched]
    _scan(
        ctx,
        walked,
        index,
        run,
        deadline,
        pattern,
        glob,
        ignore_case,
    )
    if index.narrowed and not batches and not walked:
        with empty_folder() as folder:  # ripgrep still judges the pattern: a bad one fails as ever
            empty = dataclasses.replace(snapshots[0], root=folder)
            _search_repo(
                ctx, empty, ripgrep_command(settings, pattern, glob, ignore_case, folder), run, deadline
            )
    if index.narrowed and glob and not run.total and not run.timed_out:
        # "no file matches the glob" needs ripgrep's count of every file the glob matched
        run = dataclasses.replace(_Run(), time_limit=run.time_limit, index="narrowed")
        _scan(ctx, snapshots, IndexPlan(), run, deadline, pattern, glob, ignore_case)
    return run


def _scan(
    ctx: ToolContext,
    snapshots: list[Snapshot],
    index: IndexPlan,
    run: _Run,
    deadline: float,
    pattern: str,
    glob: str | None,
    ignore_case: bool,
) -> None:
    settings = ctx.settings
    for snapshot in snapshots:
        with candidates_only(index.restricts(snapshot.repo.name)) as only:
            command = [*ripgrep_command(settings, pattern, glob, ignore_case, snapshot.root), *only]
            _search_repo(ctx, snapshot, command, run, deadline)
        if run.hit_count_limit or run.timed_out:
            return
        shown = shown_glob_matches(snapshot.root, glob, settings.search_max_file_bytes) if glob else []
        if shown:  # the files whose shown (redacted) path matches, never matched by their raw name
            run.files_searched += len(shown)
            command = [*ripgrep_command(settings, pattern, None, ignore_case, snapshot.root), "--", *shown]
            _search_repo(ctx, snapshot, command, run, deadline)
            if run.hit_count_limit or run.timed_out:
                return


def _body(run: _Run, budget: int) -> list[str]:
    """The match lines grouped by file, as many as fit in `budget` characters (run.shown is
    trimmed to those, so only lines really shown are recorded as shown)."""
    body: list[str] = []
    used = 0
    current = None
    for index, match in enumerate(run.shown):
        rows = [] if (match.repo, match.path) == current else [f"{match.repo}:{shown_name(match.path)}"]
        rows.append(f"  {match.line:>5}│ {match.text}")
        cost = sum(len(row) + 1 for row in rows)
        if body and used + cost > budget:
            del run.shown[index:]
            break
        body += rows
        used += cost
        current = (match.repo, match.path)
    return body


def _report(ctx: ToolContext, run: _Run, pattern: str, glob: str | None, repos: list[str]) -> ToolResult:
    settings = ctx.settings
    where = f"repo {repos[0]}" if len(repos) == 1 else f"{len(repos)} repos"
    filters = f" with glob={glob!r}" if glob else ""
    lines: list[str] = []
    if run.timed_out:
        lines.append(
            f"[search timed out after {run.time_limit:.3g} s; results are partial — "
            "narrow with repo=, glob= or a more specific pattern]"
        )
    order = {name: shown_order(ctx.snapshots[name].root) for name in repos if name in ctx.snapshots}
    run.shown.sort(key=lambda m: (repos.index(m.repo), order[m.repo](m.path), m.line))
    body = _body(run, settings.tool_output_max_chars - 600 - len(pattern) - len(filters))
    for match in run.shown:
        ctx.shown.add(match.repo, match.path, [match.line])
    lower_bound = run.hit_count_limit or run.timed_out
    data: dict[str, Any] = {
        "pattern": pattern,
        "matches": [vars(m) for m in run.shown],
        "total": run.total,
        "total_is_lower_bound": lower_bound,
        "timed_out": run.timed_out,
        "index": run.index,
    }
    if run.index == "unnarrowed":
        lines.append(UNNARROWED_NOTE)
    if not run.total and run.timed_out:  # a timeout is never "no matches": nobody knows
        lines.append(
            f"Nothing found for {pattern!r} in {where}{filters} before the time ran out; the rest "
            "was not searched, so matches may exist."
        )
        return finish(ctx, "\n".join(lines), data)
    if not run.total:
        if glob and not run.files_searched:
            lines.append(f"No file in {where} matches glob={glob!r}. Try a looser glob like '*.py' or none.")
        else:
            lines.append(f"No matches for {pattern!r} in {where}{filters}. {_NO_MATCH_HINT}")
        return finish(ctx, "\n".join(lines), data)
    count = f"more than {run.total:,}" if lower_bound else f"{run.total:,}"
    if len(run.shown) < run.total or lower_bound:
        lines.append(
            f"Showing {len(run.shown)} of {count} matching lines for {pattern!r} in {where}{filters} "
            "— narrow with repo=, glob= or a more specific pattern to see the rest:"
        )
    else:
        lines.append(f"{run.total} matching line(s) for {pattern!r} in {where}{filters}:")
    return finish(ctx, "\n".join(lines + body), data)
