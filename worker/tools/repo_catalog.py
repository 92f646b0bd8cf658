"""list_repos as a catalog: which repos in scope match a query, best first, and one page of them.

The system prompt lists the repos in scope only while they are few (worker/agent/prompt.py);
beyond that the model finds them here. A query's words are matched, case-insensitively, against
what the snapshot stores of each repo (name, description, languages, top-level layout) and its
README's opening (the same opening repo_overview shows). Only the repos of the question's scope
(the ToolContext's snapshots) are ever looked at, so a repo outside it is never named.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from worker.repos.snapshot import Snapshot
from worker.tools.context import ToolError

REPOS_PER_PAGE = 20
# How much a word found in each field counts towards a repo's rank (its name counts most).
_FIELD_WEIGHTS = {"name": 8, "description": 4, "languages": 2, "layout": 2, "README": 1}


@dataclass(frozen=True)
class CatalogPage:
    names: list[str]  # this page's repos, in order
    matching: int  # repos matching the query (every repo in scope without one)
    in_scope: int
    page: int
    pages: int

    def paging(self) -> dict[str, int]:
        return {"page": self.page, "pages": self.pages, "per_page": REPOS_PER_PAGE, "matching": self.matching}


def _fields(snapshot: Snapshot, readme: Callable[[str], str]) -> dict[str, str]:
    meta = snapshot.meta
    return {
        "name": snapshot.repo.name,
        "description": snapshot.repo.description,
        "languages": " ".join(meta.languages),
        "layout": " ".join(meta.top_level),
        "README": readme(snapshot.repo.name),
    }


def _rank(words: list[str], fields: dict[str, str]) -> tuple[int, int]:
    """(how many of the words the repo has, their weight by the best field each is in)."""
    lowered = {field: text.lower() for field, text in fields.items()}
    found = weight = 0
    for word in words:
        best = max((_FIELD_WEIGHTS[f] for f, text in lowered.items() if word in text), default=0)
        found += best > 0
        weight += best
    return found, weight


def select(
    snapshots: dict[str, Snapshot], query: str, page: int, readme: Callable[[str], str]
) -> CatalogPage:
    """The page `page` (from 1) of the repos matching `query`, best first (by name without one);
    `readme(name)` gives a repo's README opening, read only when there is a query."""
    words = query.lower().split()
    if words:
        ranks = {name: _rank(words, _fields(s, readme)) for name, s in snapshots.items()}
        order = sorted((n for n, r in ranks.items() if r[0]), key=lambda n: (-ranks[n][0], -ranks[n][1], n))
    else:
        order = sorted(snapshots)
    pages = max(1, math.ceil(len(order) / REPOS_PER_PAGE))
    if page < 1 or page > pages:
        raise ToolError(
            f"there is no page {page}: {len(order)} repo(s) make {pages} page(s) of {REPOS_PER_PAGE}; "
            "pass page=1" + (f" to page={pages}" if pages > 1 else "")
        )
    start = (page - 1) * REPOS_PER_PAGE
    return CatalogPage(order[start : start + REPOS_PER_PAGE], len(order), len(snapshots), page, pages)


def heading(found: CatalogPage, query: str) -> str:
    """The line above the rows: how many repos, which page, and how to get the next one."""
    words = " ".join(query.split())
    if words:
        line = f"{found.matching} of {found.in_scope} repo(s) in scope match {words!r}, best first"
    else:
        line = f"{found.in_scope} repo(s) in scope"
    if found.pages > 1:
        line += f"; page {found.page} of {found.pages}, {REPOS_PER_PAGE} per page"
        if found.page < found.pages:
            line += f" (page={found.page + 1} for the next)"
    return line + ":"


def no_match(in_scope: int, query: str) -> str:
    return (
        f"No repo in scope matches {' '.join(query.split())!r} ({in_scope} repo(s) in scope): try "
        "other words (a name, a language, a folder, a word of the README), or no query for all of them."
    )
