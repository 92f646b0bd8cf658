"""What one question's tool calls share: the snapshots in scope, caches, and what was shown.

`ShownLines` is the evidence for citation checking: a citation is verified only if every line
it names was shown to the model by a tool during this question. `ShownHistory` is the same for
citations of history: the commits, and the lines of a file at a commit, that a tool showed.
"""

from __future__ import annotations

import difflib
import re
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from config.settings import Settings
from worker.repos.snapshot import Snapshot

# Up to this many repos in scope, the model is told their names (in the prompt, in an unknown
# repo's error, when asked to read code first); beyond it, their count and list_repos' query.
REPOS_NAMED_MAX = 10


class ToolError(Exception):
    """A failure the model can act on; it reaches the model as `Error: <message>`."""


@dataclass
class ShownLines:
    lines: dict[tuple[str, str], set[int]] = field(default_factory=lambda: defaultdict(set))

    def add(self, repo: str, path: str, numbers: Iterable[int]) -> None:
        self.lines[(repo, path)].update(numbers)

    def covers(self, repo: str, path: str, start: int, end: int) -> bool:
        seen = self.lines.get((repo, path), set())
        return all(n in seen for n in range(start, end + 1))

    def files(self) -> set[tuple[str, str]]:
        return {key for key, seen in self.lines.items() if seen}


@dataclass
class ShownHistory:
    """What the history tools showed: commits (full shas, by repo) and lines of files at a commit."""

    commits: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    lines: dict[tuple[str, str, str], set[int]] = field(default_factory=lambda: defaultdict(set))

    def add_commits(self, repo: str, shas: Iterable[str]) -> None:
        self.commits[repo].update(shas)

    def add_lines(self, repo: str, sha: str, path: str, numbers: Iterable[int]) -> None:
        self.commits[repo].add(sha)
        self.lines[(repo, sha, path)].update(numbers)

    def commit(self, repo: str, prefix: str) -> str | None:
        """The one shown commit of `repo` whose sha starts with `prefix`, or None (none, or several)."""
        found = [sha for sha in self.commits.get(repo, ()) if sha.startswith(prefix)]
        return found[0] if len(found) == 1 else None

    def covers(self, repo: str, sha: str, path: str, start: int, end: int) -> bool:
        seen = self.lines.get((repo, sha, path), set())
        return all(n in seen for n in range(start, end + 1))


@dataclass
class ToolContext:
    settings: Settings
    snapshots: dict[str, Snapshot]  # the repos in scope for this question, by name
    redact: Callable[[str], str] = lambda text: text  # set to a Redactor's redact in real use
    shown: ShownLines = field(default_factory=ShownLines)
    history: ShownHistory = field(default_factory=ShownHistory)  # what log, blame, show and diff showed
    # (repo, path) -> the file's lines after redaction; a file is read from disk once per question
    file_cache: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    # a repeated identical call returns the earlier result
    result_cache: dict[str, Any] = field(default_factory=dict)
    # time.monotonic() by which tool work must end (the question's deadline); None: no bound
    deadline: float | None = None
    # Whether results keep their structured `data` (`codebot tool` prints it). The agent
    # and MCP pass only the text on: building its redacted, inert copy would be work for nothing
    # (~1 ms of a 200-line read_file, done while a search runs on the same cores).
    keep_data: bool = True
    # the repos in scope whose names the question writes: a search shows their lines first
    # within each rank (worker/tools/search_ranking.py); the tools otherwise know no question text
    named_repos: frozenset[str] = frozenset()

    def time_left(self, limit: float) -> float:
        """`limit` seconds, or fewer when the question's deadline comes sooner: a subprocess a tool
        starts with this timeout (git) is killed by the deadline, so it never holds a tool thread
        past it."""
        if self.deadline is None:
            return limit
        return max(0.01, min(limit, self.deadline - time.monotonic()))

    def snapshot(self, repo: str | None) -> Snapshot:
        if not repo:
            if len(self.snapshots) == 1:
                return next(iter(self.snapshots.values()))
            raise ToolError(f"say which repo: one of {', '.join(sorted(self.snapshots))}")
        found = self.snapshots.get(repo)
        if found is None:
            raise ToolError(unknown_repo_message(repo, list(self.snapshots)))
        return found


def unknown_repo_message(name: str, available: list[str]) -> str:
    if not available:
        return f"repo {name!r} is not available, and no repo is in scope for this question"
    near = difflib.get_close_matches(name, available, n=1)
    hint = f" Did you mean {near[0]!r}?" if near else ""
    return f"repo {name!r} is not available.{hint} Repos in scope: {repos_in_scope(available)}"


def repos_in_scope(available: Collection[str]) -> str:
    """The repos in scope as a model is told them: named, or beyond REPOS_NAMED_MAX counted and
    found through list_repos (a text the size of the whitelist, on every turn it is repeated, is
    what the catalog exists to spare)."""
    if len(available) > REPOS_NAMED_MAX:
        return f"{len(available)} repos; find one with list_repos(query=...)"
    return ", ".join(sorted(available)) or "(none)"


def repos_named_in(text: str, names: Iterable[str]) -> frozenset[str]:
    """The repos among `names` whose name the question writes as a word of its own, in any case
    ("payments-api" in "how does payments-api retry?", not in "payments-api-v2")."""
    lowered = text.lower()
    return frozenset(
        name for name in names if re.search(rf"(?<![\w.-]){re.escape(name.lower())}(?![\w-]|\.\w)", lowered)
    )
