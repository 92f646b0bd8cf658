"""list_repos and repo_overview: what the model reads first, from facts stored with each snapshot."""

from __future__ import annotations

import time
from typing import Any

from worker.tools.context import ToolContext, ToolError
from worker.tools.paths import human_size, resolve_path
from worker.tools.redact import finish
from worker.tools.registry import ToolResult

_LANGUAGES_SHOWN = 8


def _date(seconds: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(seconds)) if seconds else "unknown date"


def list_repos(ctx: ToolContext) -> ToolResult:
    """List the repos you can read for this question: name, description, branch, commit, languages.

    Call it first when you do not know which repo holds the answer. Pass a repo's name to the
    other tools.
    """
    if not ctx.snapshots:
        return finish(ctx, "No repo is in scope for this question.", {"repos": []})
    lines = [f"{len(ctx.snapshots)} repo(s) in scope:"]
    repos: list[dict[str, Any]] = []
    for name in sorted(ctx.snapshots):
        snapshot = ctx.snapshots[name]
        languages = snapshot.meta.main_languages()
        description = snapshot.repo.description or "(no description)"
        lines.append(
            f"- {name}: {description} — branch {snapshot.branch} @ {snapshot.short_sha} "
            f"({_date(snapshot.committed_at)}); languages: {', '.join(languages) or 'unknown'}"
        )
        repos.append(
            {
                "name": name,
                "description": snapshot.repo.description,
                "branch": snapshot.branch,
                "commit": snapshot.short_sha,
                "languages": languages,
            }
        )
    return finish(ctx, "\n".join(lines), {"repos": repos})


def _readme_opening(ctx: ToolContext, repo: str, readme: str, limit: int) -> tuple[str, int, bool] | None:
    """(opening text, last line shown in full, whether the README goes on) or None."""
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
            with open(absolute, "rb") as handle:
                raw = handle.read(budget)
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


def repo_overview(ctx: ToolContext, repo: str) -> ToolResult:
    """Get one repo's overview: file count, languages, top-level layout and the README's opening.

    Use it to orient yourself in a repo before searching: where the source, tests and docs live.

    Args:
        repo: the repo's name, as listed by list_repos
    """
    snapshot = ctx.snapshot(repo)
    name = snapshot.repo.name
    meta = snapshot.meta
    languages = ", ".join(
        f"{lang} ({count})" for lang, count in list(meta.languages.items())[:_LANGUAGES_SHOWN]
    )
    lines = [
        f"{name}: {snapshot.repo.description or '(no description)'}",
        f"branch {snapshot.branch} @ {snapshot.short_sha}, committed {_date(snapshot.committed_at)}",
        f"{meta.file_count:,} files, {human_size(meta.size_bytes)}; "
        f"languages by file count: {languages or 'unknown'}",
        "top level: " + (", ".join(meta.top_level) or "(empty)"),
    ]
    data: dict[str, Any] = {
        "repo": name,
        "description": snapshot.repo.description,
        "branch": snapshot.branch,
        "commit": snapshot.short_sha,
        "file_count": meta.file_count,
        "size_bytes": meta.size_bytes,
        "languages": dict(meta.languages),
        "top_level": list(meta.top_level),
        "readme": None,
    }
    limit = ctx.settings.overview_readme_chars
    opening = _readme_opening(ctx, name, meta.readme, limit) if meta.readme and limit else None
    if opening is not None and meta.readme and opening[1]:
        text, last_line, more = opening
        ctx.shown.add(name, meta.readme, range(1, last_line + 1))
        lines += ["", f"{meta.readme} (lines 1-{last_line}):", text]
        if more:
            lines.append(
                f"[README continues: read_file with path={meta.readme!r} start_line={last_line + 1}]"
            )
        data["readme"] = {"path": meta.readme, "text": text, "last_line": last_line}
    elif not meta.readme:
        lines.append("(no README at the root)")
    return finish(ctx, "\n".join(lines), data)
