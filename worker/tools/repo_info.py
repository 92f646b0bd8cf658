"""list_repos and repo_overview: what the model reads first, from facts stored with each snapshot."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from worker.repos.freshness import age_text
from worker.repos.regular_files import NotRegularFile, open_regular
from worker.repos.snapshot import LANGUAGES_BY_SUFFIX, Snapshot
from worker.repos.symbol_grammars import LANGUAGE_OF_SUFFIX
from worker.repos.symbols import IndexInfo, SkippedFile, open_index
from worker.repos.visible import shown_name
from worker.tools.context import ToolContext, ToolError
from worker.tools.files import NOT_REGULAR_HINT
from worker.tools.paths import human_size, resolve_path
from worker.tools.redact import finish
from worker.tools.registry import ToolResult
from worker.tools.repo_catalog import heading, no_match, select

_LANGUAGES_SHOWN = 8
_NOT_INDEXED_SHOWN = 5
# The languages (as repo_overview counts files) that find_definition and find_references cover.
NAVIGABLE_LANGUAGES = frozenset(
    LANGUAGES_BY_SUFFIX[s] for s in LANGUAGE_OF_SUFFIX if s in LANGUAGES_BY_SUFFIX
)


def _date(seconds: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(seconds)) if seconds else "unknown date"


def commit_age(snapshot: Snapshot, now: float | None = None) -> str:
    """How old the commit is, as answers say it (worker/repos/freshness.py), and its date when
    that is believed: `committed 3 d ago, fetched 2 min ago; commit date 2026-03-02`."""
    age = age_text(snapshot.committed_at, snapshot.created_at, time.time() if now is None else now)
    return f"{age}; commit date {_date(snapshot.committed_at)}" if age.startswith("committed") else age


def commit_times(snapshot: Snapshot) -> dict[str, str | None]:
    """The commit's date (what the repo says) and when codebot fetched it, ISO 8601 UTC."""
    return {"committed_at": _iso(snapshot.committed_at), "fetched_at": _iso(snapshot.created_at)}


def _iso(seconds: float) -> str | None:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds)) if seconds else None


def list_repos(ctx: ToolContext, query: str = "", page: int = 1) -> ToolResult:
    """List the repos you can read: name, description, branch, commit and its age, languages; a page at a time.

    Call it when you do not know which repo holds the answer; pass a repo's name to the other tools.

    Args:
        query: words to find repos by (name, description, language, top-level folder, README words); best matches first
        page: which page, from 1 (the reply says how many there are)
    """
    if not ctx.snapshots:
        return finish(ctx, "No repo is in scope for this question.", {"repos": []})
    found = select(ctx.snapshots, query, page, lambda name: _readme_words(ctx, name))
    if not found.names:
        return finish(ctx, no_match(found.in_scope, query), {"repos": [], **found.paging()})
    lines = [heading(found, query)]
    repos: list[dict[str, Any]] = []
    for name in found.names:
        snapshot = ctx.snapshots[name]
        languages = snapshot.meta.main_languages()
        description = snapshot.repo.description or "(no description)"
        lines.append(
            f"- {name}: {description} — branch {snapshot.branch} @ {snapshot.short_sha} "
            f"({commit_age(snapshot)}); languages: {', '.join(languages) or 'unknown'}"
        )
        repos.append(
            {
                "name": name,
                "description": snapshot.repo.description,
                "branch": snapshot.branch,
                "commit": snapshot.short_sha,
                **commit_times(snapshot),
                "languages": languages,
            }
        )
    return finish(ctx, "\n".join(lines), {"repos": repos, **found.paging()})


# (snapshot root, commit, README path, characters) -> its redacted opening. A snapshot never changes, and
# a query reads every README in scope: redacting 300 of them again was ~1 s of a call.
_README_WORDS: dict[tuple[str, str, str, int], str] = {}
_README_WORDS_KEPT = 4096


def _readme_words(ctx: ToolContext, repo: str) -> str:
    """The README's opening as repo_overview shows it (redacted), for list_repos' query ('' when none)."""
    snapshot = ctx.snapshots[repo]
    readme, limit = snapshot.meta.readme, ctx.settings.overview_readme_chars
    if not readme or not limit:
        return ""
    key = (str(snapshot.root), snapshot.sha, readme, limit)
    words = _README_WORDS.get(key)
    if words is None:
        opening = _readme_opening(ctx, repo, readme, limit)
        words = opening[0] if isinstance(opening, tuple) else ""
        if len(_README_WORDS) >= _README_WORDS_KEPT:
            _README_WORDS.clear()
        _README_WORDS[key] = words
    return words


def _readme_opening(
    ctx: ToolContext, repo: str, readme: str, limit: int
) -> tuple[str, int, bool] | str | None:
    """(opening text, last line shown in full, whether the README goes on), the line saying why
    it is not read, or None."""
    snapshot = ctx.snapshots[repo]
    try:
        absolute, relative = resolve_path(snapshot, readme, ctx.settings)
    except ToolError:
        return None  # e.g. a README that is a link leaving the repo: say nothing of it
    cached = ctx.file_cache.get((repo, relative))
    if cached is not None:
        text, complete = "\n".join(cached), True
    else:
        budget = limit * 4 + 4096  # enough bytes for `limit` characters of any UTF-8 text
        try:
            with open_regular(absolute) as handle:
                raw = handle.read(budget)
        except NotRegularFile as exc:  # never opened: a FIFO would hold the call forever
            return f"({shown_name(readme)} is not a regular file ({exc.kind}), so it is not read: {NOT_REGULAR_HINT})"
        except OSError:
            return None
        text, complete = ctx.redact(raw.decode("utf-8", errors="replace")), len(raw) < budget
    if complete and len(text) <= limit:
        lines = text.rstrip("\n").split("\n")
        return "\n".join(lines), len(lines), False
    cut = text[:limit]
    if "\n" in cut:
        cut = cut[: cut.rindex("\n")]  # end on a whole line so every shown line is complete
    shown = cut.count("\n") + 1 if cut else 0
    return cut, shown, True


def _language_shares(languages: dict[str, int]) -> list[dict[str, Any]]:
    """Each language's files and share of the files in a known language, and whether
    find_definition/find_references cover it."""
    total = sum(languages.values()) or 1
    return [
        {"language": lang, "files": count, "share": count / total, "navigation": lang in NAVIGABLE_LANGUAGES}
        for lang, count in languages.items()
    ]


def _navigation(ctx: ToolContext, snapshot: Snapshot) -> tuple[str, dict[str, Any]]:
    """One line on the snapshot's symbol index: files indexed, and the ones that are not and why."""
    # Its counts stop at the navigation time limit, as find_definition's lookups do.
    deadline = time.monotonic() + ctx.time_left(ctx.settings.navigation_timeout_seconds)
    try:
        index = open_index(snapshot.root, ctx.settings, deadline)
    except (OSError, sqlite3.Error):
        return "code navigation: no index for this snapshot (use search)", {
            "indexed": None,
            "not_indexed": [],
        }
    try:
        info: IndexInfo = index.info()
        skipped: list[SkippedFile] = index.not_indexed(limit=_NOT_INDEXED_SHOWN)
    except sqlite3.OperationalError:  # the time limit: the index is there, its counts unknown
        return "code navigation (find_definition, find_references): ran out of time counting its files", {
            "indexed": None,
            "not_indexed": [],
            "timed_out": True,
        }
    finally:
        index.close()
    line = f"code navigation (find_definition, find_references): {info.indexed:,} file{'' if info.indexed == 1 else 's'} indexed"
    if info.partial:
        line += " (only the first files of this very large repo)"
    if info.pending:
        line += f" (still being built: {info.pending:,} files not parsed yet)"
    if info.not_indexed:
        shown = "; ".join(f"{shown_name(f.path)}: {f.reason}" for f in skipped)
        more = f"; and {info.not_indexed - len(skipped):,} more" if info.not_indexed > len(skipped) else ""
        line += f"; {info.not_indexed:,} not indexed ({shown}{more})"
    data = {
        "indexed": info.indexed,
        "not_indexed": [{"path": f.path, "language": f.language, "reason": f.reason} for f in skipped],
    }
    return line, data


def repo_overview(ctx: ToolContext, repo: str) -> ToolResult:
    """One repo's overview: file count, languages (share, which have code navigation), top-level layout, README opening.

    Use it before searching a repo: where its source, tests and docs live.

    Args:
        repo: the repo's name
    """
    snapshot = ctx.snapshot(repo)
    name = snapshot.repo.name
    meta = snapshot.meta
    shares = _language_shares(meta.languages)
    languages = ", ".join(
        f"{s['language']} {s['share']:.0%} ({s['files']:,}{', navigation' if s['navigation'] else ''})"
        for s in shares[:_LANGUAGES_SHOWN]
    )
    lines = [
        f"{name}: {snapshot.repo.description or '(no description)'}",
        f"branch {snapshot.branch} @ {snapshot.short_sha}, committed {_date(snapshot.committed_at)}",
        f"{meta.file_count:,} files, {human_size(meta.size_bytes)}; "
        f"languages by file count: {languages or 'unknown'}",
        "top level: " + (", ".join(meta.top_level) or "(empty)"),
    ]
    navigation = _navigation(ctx, snapshot)
    lines.append(navigation[0])
    data: dict[str, Any] = {
        "repo": name,
        "description": snapshot.repo.description,
        "branch": snapshot.branch,
        "commit": snapshot.short_sha,
        "file_count": meta.file_count,
        "size_bytes": meta.size_bytes,
        "languages": dict(meta.languages),
        "language_shares": shares,
        "navigation": navigation[1],
        "top_level": list(meta.top_level),
    }
    readme_lines, data["readme"] = _readme_part(ctx, snapshot)
    return finish(ctx, "\n".join([*lines, *readme_lines]), data)


def _readme_part(ctx: ToolContext, snapshot: Snapshot) -> tuple[list[str], dict[str, Any] | None]:
    """The README's opening as the overview shows it, and as data (None when none is shown)."""
    name = snapshot.repo.name
    readme = snapshot.meta.readme
    if not readme:
        return ["(no README at the root)"], None
    limit = ctx.settings.overview_readme_chars
    opening = _readme_opening(ctx, name, readme, limit) if limit else None
    if isinstance(opening, str):
        return ["", opening], None
    if opening is None or not opening[1]:
        return [], None
    text, last_line, more = opening
    ctx.shown.add(name, readme, range(1, last_line + 1))
    lines = ["", f"{readme} (lines 1-{last_line}):", text]
    if more:
        lines.append(f"[README continues: read_file with path={readme!r} start_line={last_line + 1}]")
    return lines, {"path": readme, "text": text, "last_line": last_line}
