"""The model's tools: read-only functions over the snapshots of whitelisted repos.

`build_registry()` gives them to the agent and to `codebot tool`; `make_context()` prepares
what one question's calls share, with redaction wired in.
"""

from __future__ import annotations

from collections.abc import Mapping

from config.settings import Settings
from worker.repos.snapshot import Snapshot
from worker.tools.context import ToolContext, ToolError, repos_named_in
from worker.tools.files import read_file
from worker.tools.history import blame, diff, log, show
from worker.tools.listing import list_files
from worker.tools.navigation import find_definition, find_references
from worker.tools.redact import get_redactor
from worker.tools.registry import ToolOutcome, ToolRegistry, ToolResult
from worker.tools.repo_info import list_repos, repo_overview
from worker.tools.search import search

CONTRACT_TOOLS = (list_repos, search, read_file, list_files, repo_overview)
# Code navigation from the snapshot's symbol index (worker/repos/symbols.py), after the contract's five.
NAVIGATION_TOOLS = (find_definition, find_references)
# History from the repo's mirror (worker/tools/history.py): who changed what, when and why.
HISTORY_TOOLS = (log, blame, show, diff)
TOOL_FUNCTIONS = (*CONTRACT_TOOLS, *NAVIGATION_TOOLS, *HISTORY_TOOLS)

__all__ = [
    "TOOL_FUNCTIONS",
    "ToolContext",
    "ToolError",
    "ToolOutcome",
    "ToolRegistry",
    "ToolResult",
    "build_registry",
    "make_context",
]


def build_registry() -> ToolRegistry:
    """The five contract tools, in the contract's order, then code navigation, then history."""
    return ToolRegistry(TOOL_FUNCTIONS)


def make_context(
    settings: Settings, snapshots: Mapping[str, Snapshot], *, keep_data: bool = True, question: str = ""
) -> ToolContext:
    """A fresh context for one question (or one `codebot tool` run) over these snapshots;
    `keep_data=False` when only the results' text is used (the agent, MCP); `question`: its
    text, for the repos it names."""
    return ToolContext(
        settings=settings,
        snapshots=dict(snapshots),
        redact=get_redactor().redact,
        keep_data=keep_data,
        named_repos=repos_named_in(question, snapshots),
    )
