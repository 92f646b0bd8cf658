"""One ripgrep process of a search, read: its matching lines gathered into the search's `Run`.

Every match counted is kept (at most `search_count_limit` of them, each line cut to
`search_max_line_chars`), not only the first lines that will be shown: which lines a search
shows is decided after, over all of them (worker/tools/search_ranking.py). A repo is read up to
its share of the count limit, so that a common word cannot fill the limit from the first repo
read (worker/tools/search.py hands out the shares).
"""

from __future__ import annotations

import functools
import os
import re
import select
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO

from worker.repos.snapshot import Snapshot
from worker.tools.context import ToolContext, ToolError
from worker.tools.search_command import max_line_bytes
from worker.tools.search_indexed import PLACEHOLDER_NOTICE, CandidateBatch

_LINE_NUMBER = re.compile(rb"(\d+):")
_FILES_SEARCHED = re.compile(rb"(\d+) files searched")
# what rg prints, without a NUL, for a file it stops reading at a NUL byte after a match
_BINARY_WARNING = re.compile(rb".*: WARNING: stopped searching binary file")
# (ripgrep counts the matches left out only when --stats is on)
_PREVIEW_TAIL = re.compile(rb" \[\.\.\. (?:\d+ more matche?s?|omitted end of long line)\]$")
REGEX_HINT = (
    "The pattern is a ripgrep (Rust) regex: escape ( ) [ ] { } . * + ? | \\ with a backslash for "
    "literal text; look-around and backreferences are not supported; a match cannot span lines."
)


@dataclass
class Match:
    repo: str
    path: str
    line: int
    text: str


@dataclass
class Run:
    """What one search gathered over all repos in scope."""

    found: list[Match] = field(default_factory=list)  # every match counted, as ripgrep printed them
    shown: list[Match] = field(default_factory=list)  # the ones the reply shows, in its order
    total: int = 0
    files_searched: int = 0
    hit_count_limit: bool = False
    timed_out: bool = False
    time_limit: float = 0.0  # seconds this search was allowed
    index: str = "none"  # the search index: "narrowed" the files read, "unnarrowed", or "none"
    cut: set[str] = field(default_factory=set)  # repos read only up to their share: counted in part
    reading: str | None = None  # the repo being read when the count limit or the time ran out

    def counted(self) -> Counter[str]:
        """Matches counted per repo."""
        return Counter(m.repo for m in self.found)

    def forget(self, repo: str) -> None:
        """Drop what was counted in `repo`, to read it again with a larger share."""
        kept = [m for m in self.found if m.repo != repo]
        self.total -= len(self.found) - len(kept)
        self.found = kept
        self.cut.discard(repo)


def show_line(ctx: ToolContext, raw: bytes) -> str:
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


def read_matches(
    ctx: ToolContext,
    snapshot: Snapshot,
    command: list[str],
    run: Run,
    deadline: float,
    share: int,
    batch: CandidateBatch | None = None,
) -> None:
    """Run `command` in the snapshot and count its matches into `run`, until the repo has
    `share` of them (it is then marked cut), the count limit is reached, or the deadline passes.
    With a `batch` (search_indexed.py), rg runs over its paths of many repos, each match told to
    its own repo, and a repo at its share is cut while the others are read on."""
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
    run.reading = snapshot.repo.name
    try:
        if batch is None:
            _consume(ctx, snapshot, process, run, deadline, share)
        else:
            _consume_batch(ctx, batch, process, run, deadline, share)
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
            raise ToolError(f"ripgrep rejected the search: {message}. {REGEX_HINT}")


def _lines(process: subprocess.Popen[bytes], run: Run, deadline: float) -> Iterator[bytes]:
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
    run: Run,
    deadline: float,
    share: int,
) -> None:
    """Records are `path NUL number:text`. A line without a NUL is a piece of a path holding a
    newline (joined to the next record), rg's warning about a binary file, or, at the end,
    its --stats."""
    repo = snapshot.repo.name
    in_repo = sum(1 for m in run.found if m.repo == repo)  # a glob's second command adds to the first's
    loose: list[bytes] = []
    for raw in _lines(process, run, deadline):
        path, nul, rest = raw.partition(b"\0")
        number = _LINE_NUMBER.match(rest) if nul else None
        if number is None:
            if not _BINARY_WARNING.match(raw):
                loose.append(raw)
            continue
        if loose:
            path = b"\n".join([*loose, path])
            loose = []
        name = path.decode("utf-8", errors="replace").removeprefix("./")
        run.found.append(Match(repo, name, int(number.group(1)), show_line(ctx, rest[number.end() :])))
        run.total += 1
        in_repo += 1
        if run.total >= ctx.settings.search_count_limit:
            run.hit_count_limit = True
            return
        if in_repo >= share:
            run.cut.add(repo)
            return
    _count_files_searched(run, loose)


def _consume_batch(
    ctx: ToolContext,
    batch: CandidateBatch,
    process: subprocess.Popen[bytes],
    run: Run,
    deadline: float,
    share: int,
) -> None:
    """`_consume` for one rg over many repos' candidates: a repo at its share is cut and its
    later matches passed over, while the other repos' are still counted. rg prints a file given
    by path that holds a NUL as a binary match; in a snapshot only placeholders do, which the
    walk never prints."""
    in_repo = Counter(m.repo for m in run.found)
    loose: list[bytes] = []
    for raw in _lines(process, run, deadline):
        path, nul, rest = raw.partition(b"\0")
        number = _LINE_NUMBER.match(rest) if nul else None
        if number is None:
            if not _BINARY_WARNING.match(raw) and not PLACEHOLDER_NOTICE.fullmatch(raw):
                loose.append(raw)
            continue
        if loose:
            path = b"\n".join([*loose, path])
            loose = []
        repo, name = batch.locate(path)
        if repo in run.cut:
            continue
        run.found.append(
            Match(repo, name.removeprefix("./"), int(number.group(1)), show_line(ctx, rest[number.end() :]))
        )
        run.total += 1
        in_repo[repo] += 1
        if run.total >= ctx.settings.search_count_limit:
            run.hit_count_limit = True
            return
        if in_repo[repo] >= share:
            run.cut.add(repo)
    _count_files_searched(run, loose)


def _count_files_searched(run: Run, loose: list[bytes]) -> None:
    """rg's --stats, the lines left at the end of its output: the files it searched."""
    for line in loose:
        searched = _FILES_SEARCHED.fullmatch(line)
        if searched:
            run.files_searched += int(searched.group(1))
