"""Which repos a question may read: `repo:NAME` in its text, and the channel's allow-list.

Shared by every adapter and the console so the rules are the same everywhere. Refusals say
why without revealing anything of a repo the channel may not see, not even that it exists.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from config.repos import Whitelist
from worker.tools.redact import get_redactor

# A name never ends in a dot here: "… in repo:payments." ends a sentence, not the name.
REPO_FILTER = re.compile(r"(?<![\w/])repo:([A-Za-z0-9._-]*[A-Za-z0-9_-])")


@dataclass(frozen=True)
class Scope:
    repos: list[str]  # names the question may read; empty when refused
    refusal: str | None = None  # what to tell the asker instead of answering


def redact_and_extract_repos(text: str) -> tuple[str, list[str]]:
    """("how does repo:rq retry?") -> ("how does retry?", ["rq"]).

    Every intake (Slack, Discord, console, MCP) reads a question through here, so this is where
    a secret someone pasted into it is redacted: it never reaches the queue, the thread memory,
    the logs or the model.
    """
    names = [m.lower() for m in REPO_FILTER.findall(text)]
    cleaned = re.sub(r"\s{2,}", " ", REPO_FILTER.sub("", text)).strip()
    return get_redactor().redact(cleaned), list(dict.fromkeys(names))


def _listing(names: list[str], near: str | None) -> str:
    ordered = sorted(names)
    if near is not None:
        ranked = difflib.get_close_matches(near, ordered, n=len(ordered), cutoff=0.0)
        ordered = ranked + [n for n in ordered if n not in ranked]
    return ", ".join(f"`{n}`" for n in ordered) if ordered else "(none)"


def resolve_scope(whitelist: Whitelist, channel_key: str | None, requested: list[str]) -> Scope:
    """channel_key None means no channel restriction applies (the console, an admin tool)."""
    visible = [r.name for r in whitelist.repos if channel_key is None or r.allowed_in(channel_key)]
    if not requested:
        if not visible:
            return Scope([], "No repository is available in this channel.")
        return Scope(visible)
    for name in requested:
        # A repo this channel may not see gets the very answer a repo that does not exist gets:
        # a channel cannot learn which restricted repo names exist by asking.
        if name not in visible:
            return Scope(
                [], f"There is no repo `{name}`. Repos you can ask about here: {_listing(visible, name)}"
            )
    return Scope(requested)
