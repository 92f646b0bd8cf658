"""What a user reads about each tool call while a question is answered: a progress line, and
for a failed call the line that says so ("no repo `acme`"), never one showing it as done.

The arguments are the model's (steerable by hostile repo text): each stays inside its code span
(no backtick, no blank line to end it), and a repo or tool is shown as a bare name, so no part
of a progress line or task card can become a link or markup.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

ARGUMENT_PREVIEW_CHARS = 60
NAME_PREVIEW_CHARS = 40
FAILED = "{description} — failed: {why}"
WHY_NO_REPO = "no repo `{name}`"
WHY_NO_TOOL = "no tool `{name}`"
WHY_ERROR = "the tool answered with an error"
# While a model reply is awaited (worker/agent/waiting.py): the same line in the console and chat.
WAITING_LINES = {
    "reading": "waiting for the model: prompt {read:,} of {total:,} tokens read",
    "waiting": "waiting for the model ({seconds:.0f} s)",
    "writing": "writing, {tokens:,} token{s}",
}


def _name(value: object) -> str:
    return re.sub(r"[^\w.-]", "", str(value or ""))[:NAME_PREVIEW_CHARS]


def _short(value: object) -> str:
    text = " ".join(str(value).replace("`", "'").split())
    return text if len(text) <= ARGUMENT_PREVIEW_CHARS else text[: ARGUMENT_PREVIEW_CHARS - 1] + "…"


def describe_call(name: str, arguments: dict[str, Any], default_repo: str | None) -> str:
    """A progress line a user can follow: "searching `retry|backoff` in payments-api"."""
    repo = _name(arguments.get("repo")) or default_repo or "all repos"
    short = _short
    if name == "search":
        return f"searching `{short(arguments.get('pattern', ''))}` in {repo}"
    if name == "read_file":
        start = arguments.get("start_line") or 1
        end = arguments.get("end_line")
        lines = f"L{start}-{end}" if end else f"from L{start}"
        return f"reading `{short(arguments.get('path', ''))}` {lines} in {repo}"
    if name == "list_files":
        return f"listing `{short(arguments.get('path') or '/')}` in {repo}"
    if name == "repo_overview":
        return f"looking over {repo}"
    if name == "list_repos":
        return "listing the repositories"
    if name == "find_definition":
        return f"finding the definition of `{short(arguments.get('symbol', ''))}` in {repo}"
    if name == "find_references":
        return f"finding uses of `{short(arguments.get('symbol', ''))}` in {repo}"
    if name == "log":
        subject = arguments.get("path") or arguments.get("query")
        return f"reading the history of {f'`{short(subject)}` in ' if subject else ''}{repo}"
    if name == "blame":
        return f"finding who last changed `{short(arguments.get('path', ''))}` in {repo}"
    if name == "show":
        return f"reading commit `{short(arguments.get('sha', ''))}` in {repo}"
    if name == "diff":
        return f"comparing `{short(arguments.get('from', ''))}` with `{short(arguments.get('to') or 'HEAD')}` in {repo}"
    return f"calling {short(name)}"


def call_subject(name: str, arguments: dict[str, Any], default_repo: str | None) -> str:
    """What a call worked on, for a line naming it: "read_file of `payments-api/README.md`"."""
    repo = _name(arguments.get("repo")) or default_repo or "all repos"
    tool = _name(name) or "?"
    for key in ("path", "pattern", "symbol", "sha"):
        value = arguments.get(key)
        if value and key == "path":
            return f"{tool} of `{_short(f'{repo}/{value}')}`"
        if value:
            return f"{tool} of `{_short(value)}` in {repo}"
    return f"{tool} on {repo}"


def sure_failure(name: str, arguments: dict[str, Any], scope: Collection[str], tools: Collection[str]) -> str:
    """Why this call cannot work, before it runs ("no repo `acme`"), or "" when it may."""
    if name not in tools:
        return WHY_NO_TOOL.format(name=_name(name) or "?")
    repo = arguments.get("repo")
    if isinstance(repo, str) and repo and repo not in scope:
        return WHY_NO_REPO.format(name=_name(repo) or "?")
    return ""


def failed_line(description: str, why: str) -> str:
    """The line a failed call is shown with, in place of its description."""
    return FAILED.format(description=description, why=why or WHY_ERROR)


def preview_arguments(raw: str) -> dict[str, Any]:
    """The model's arguments as far as they parse ({} when they do not: the call then fails)."""
    try:
        parsed = json.loads(raw or "{}")
    except (ValueError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}
