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
import json
import os
import time
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from worker.repos.snapshot import Snapshot
from worker.repos.visible import shown_name
from worker.tools.context import ToolContext, ToolError
from worker.tools.redact import finish
from worker.tools.registry import ToolResult
from worker.tools.search_command import ripgrep_binary as ripgrep_binary  # the benches' import
from worker.tools.search_command import ripgrep_command
from worker.tools.search_indexed import (
    UNNARROWED_NOTE,
    CandidateBatch,
    IndexPlan,
    candidate_batches,
    candidates_only,
    empty_folder,
    index_plan,
)
from worker.tools.search_ranking import (
    DEFINITION,
    OTHER,
    PATH_MATCH,
    NotShown,
    names_in_pattern,
    not_shown,
    not_shown_line,
    rank,
)
from worker.tools.search_run import Match, Run, read_matches
from worker.tools.search_signals import definition_sites, path_matcher
from worker.tools.visible_paths import shown_glob_matches, shown_order

_NO_MATCH_HINT = (
    "Try ignore_case=true, fewer or shorter words, an alternation like 'retry|backoff', "
    "or escape regex characters ( ) [ ] { } . * + ? | with a backslash to match them literally."
)


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
    .gitignored and secret files are skipped. Shows up to 50 matches, definitions first, and
    where the rest are: then narrow with repo, glob or a more specific pattern.

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
    run, deadline = _search_snapshots(ctx, snapshots, pattern, glob, ignore_case)
    repos = [s.repo.name for s in snapshots]
    run.shown = _choose(ctx, run, pattern, ignore_case, deadline)
    result = _report(ctx, run, pattern, glob, repos)
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
) -> tuple[Run, float]:
    """ripgrep over each snapshot in turn, until enough is counted or the time is up; the search
    index, where there is one, keeps ripgrep to the files that can match (search_indexed.py).
    The run and its deadline (time.monotonic())."""
    settings = ctx.settings
    run = Run()
    started = time.monotonic()
    deadline = started + settings.search_timeout_seconds
    if ctx.deadline is not None:  # a search never outlives the question it serves
        deadline = min(deadline, ctx.deadline)
    run.time_limit = max(deadline - started, 0.0)
    index = index_plan(settings, snapshots, pattern, ignore_case, deadline)
    run.index = "narrowed" if index.narrowed else "unnarrowed" if index.used else "none"
    search = _Search(ctx, index, run, deadline, pattern, glob, ignore_case)
    # one rg for the candidates of many repos, where a path can be given (search_indexed.py)
    batches, batched = candidate_batches(settings, snapshots, index) if not glob else ([], set())
    read = [s for s in snapshots if not index.skips(s.repo.name)]
    search.scan(read, batches, batched)
    if index.narrowed and not batches and not [s for s in read if s.repo.name not in batched]:
        with empty_folder() as folder:  # ripgrep still judges the pattern: a bad one fails as ever
            empty = dataclasses.replace(snapshots[0], root=folder)
            command = ripgrep_command(settings, pattern, glob, ignore_case, folder)
            read_matches(ctx, empty, command, run, deadline, settings.search_count_limit)
    if index.narrowed and glob and not run.total and not run.timed_out:
        # "no file matches the glob" needs ripgrep's count of every file the glob matched
        run = dataclasses.replace(Run(), time_limit=run.time_limit, index="narrowed")
        dataclasses.replace(search, index=IndexPlan(), run=run).scan(snapshots)
    return run, deadline


@dataclasses.dataclass
class _Search:
    ctx: ToolContext
    index: IndexPlan
    run: Run
    deadline: float
    pattern: str
    glob: str | None
    ignore_case: bool

    def scan(
        self,
        snapshots: list[Snapshot],
        batches: Sequence[CandidateBatch] = (),
        batched: AbstractSet[str] = frozenset(),
    ) -> None:
        """Each repo read up to its share of what is left of the count limit, so a common word
        cannot fill it from the first repos read (the repos of a batch, read by one rg, each up
        to an equal share); then the repos cut at their share are read again, each by its own
        rg, with what the others left over (their matches are counted anew: ripgrep's order
        of files differs from run to run), so the count is exact whenever it is under the limit.
        A second read the deadline stops is undone: the search was whole without it."""
        run, limit = self.run, self.ctx.settings.search_count_limit
        in_batches = [s for s in snapshots if s.repo.name in batched]
        command = [*ripgrep_command(self.ctx.settings, self.pattern, None, self.ignore_case), "--"]
        share = max(1, limit // max(1, len(snapshots)))
        for batch in batches:
            read_matches(self.ctx, in_batches[0], [*command, *batch.paths], run, self.deadline, share, batch)
            if run.hit_count_limit or run.timed_out:
                return
        walked = [s for s in snapshots if s.repo.name not in batched]
        for position, snapshot in enumerate(walked):
            self._read(snapshot, max(1, (limit - run.total) // (len(walked) - position)))
            if run.hit_count_limit or run.timed_out:
                return
        cut = [s for s in snapshots if s.repo.name in run.cut]
        for position, snapshot in enumerate(cut):
            had = run.counted()[snapshot.repo.name]
            share = (limit - run.total + had) // (len(cut) - position)
            if share <= had:
                continue
            counted = (run.found, run.total, set(run.cut))
            run.forget(snapshot.repo.name)
            self._read(snapshot, share)
            if run.timed_out:  # every repo was read once: the first count stands, not a timeout
                run.found, run.total, run.cut = counted
                run.timed_out = False
                return
            if run.hit_count_limit:
                return

    def _read(self, snapshot: Snapshot, share: int) -> None:
        ctx, run, glob = self.ctx, self.run, self.glob
        settings = ctx.settings
        with candidates_only(self.index.restricts(snapshot.repo.name)) as only:
            command = [*ripgrep_command(settings, self.pattern, glob, self.ignore_case, snapshot.root), *only]
            read_matches(ctx, snapshot, command, run, self.deadline, share)
        if run.hit_count_limit or run.timed_out or snapshot.repo.name in run.cut:
            return
        shown = shown_glob_matches(snapshot.root, glob, settings.search_max_file_bytes) if glob else []
        if shown:  # the files whose shown (redacted) path matches, never matched by their raw name
            run.files_searched += len(shown)
            command = [*ripgrep_command(settings, self.pattern, None, self.ignore_case, snapshot.root)]
            read_matches(ctx, snapshot, [*command, "--", *shown], run, self.deadline, share)


def _choose(ctx: ToolContext, run: Run, pattern: str, ignore_case: bool, deadline: float) -> list[Match]:
    """The matches to show, ranked (worker/tools/search_ranking.py): definitions of the names in
    the pattern, then lines of files whose path matches it, each rank spread over repos and files."""
    found = run.found
    order = {repo: shown_order(ctx.snapshots[repo].root) for repo in {m.repo for m in found}}
    repos = sorted(order)
    sites = definition_sites(ctx, repos, names_in_pattern(pattern), ignore_case, deadline) if found else set()
    in_path = path_matcher(pattern, ignore_case)
    files = {(m.repo, m.path) for m in found}
    path_matches = {(repo, path) for repo, path in files if in_path(shown_name(order[repo](path)))}

    def rank_of(match: Match) -> int:
        if (match.repo, match.path, match.line) in sites:
            return DEFINITION
        return PATH_MATCH if (match.repo, match.path) in path_matches else OTHER

    return rank(
        found, rank_of, lambda repo, path: order[repo](path), ctx.settings.search_max_results, ctx.named_repos
    )


def _body(run: Run, budget: int) -> list[str]:
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


def _not_shown(ctx: ToolContext, run: Run, lower_bound: bool) -> NotShown:
    counted_in_part = set(run.cut)
    if (run.hit_count_limit or run.timed_out) and run.reading is not None:
        counted_in_part.add(run.reading)  # stopped while reading it
    order = {repo: shown_order(ctx.snapshots[repo].root) for repo in {m.repo for m in run.found}}
    return not_shown(
        run.found, run.shown, counted_in_part, lower_bound, lambda repo, path: shown_name(order[repo](path))
    )


def _counts(ctx: ToolContext, run: Run, pattern: str, lower_bound: bool) -> tuple[NotShown, dict[str, Any]]:
    """What was not shown, and the result's data: the lines shown and the counts."""
    rest = _not_shown(ctx, run, lower_bound)
    data: dict[str, Any] = {
        "pattern": pattern,
        "matches": [vars(m) for m in run.shown],
        "total": run.total,
        "total_is_lower_bound": lower_bound,
        "timed_out": run.timed_out,
        "index": run.index,
        "counted_by_repo": dict(run.counted()),
        "not_shown": rest.data(),
    }
    return rest, data


def _report(ctx: ToolContext, run: Run, pattern: str, glob: str | None, repos: list[str]) -> ToolResult:
    settings = ctx.settings
    where = f"repo {repos[0]}" if len(repos) == 1 else f"{len(repos)} repos"
    filters = f" with glob={glob!r}" if glob else ""
    lines: list[str] = []
    if run.timed_out:
        lines.append(
            f"[search timed out after {run.time_limit:.3g} s; results are partial — "
            "narrow with repo=, glob= or a more specific pattern]"
        )
    lower_bound = run.hit_count_limit or run.timed_out or bool(run.cut)
    # room for the line on what is not shown (its counts grow by the lines the body leaves out)
    reserve = len(not_shown_line(_not_shown(ctx, run, lower_bound))) + 40 if run.found else 0
    body = _body(run, settings.tool_output_max_chars - 600 - reserve - len(pattern) - len(filters))
    for match in run.shown:
        ctx.shown.add(match.repo, match.path, [match.line])
    rest, data = _counts(ctx, run, pattern, lower_bound)
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
            "(definitions and path matches first, spread over repos and files) — narrow with repo=, "
            "glob= or a more specific pattern to see the rest."
        )
        lines.append(not_shown_line(rest))
    else:
        lines.append(f"{run.total} matching line(s) for {pattern!r} in {where}{filters}:")
    return finish(ctx, "\n".join(lines + body), data)
