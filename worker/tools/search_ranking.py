"""Which of a search's matches it shows, and what it says of the rest: pure functions.

A search counts up to `search_count_limit` matches and shows `search_max_results`. The ones shown
are chosen by relevance, never by the alphabet of repos and paths:

1. definitions: lines where the symbol index says a name written in the pattern is defined;
2. lines in files whose path (as shown) matches the pattern;
3. everything else.

Within each rank the lines are dealt out in turns, one per repo, and within a repo one per
file, so that no repo or file fills the limit while others show nothing. The repo (and file)
with the most matches takes the first turn; the shown path breaks ties. (The repos a question
names would be a signal too, but a tool call does not know the question's text.)

What is not shown is counted: how many lines, in how many files, and in which repos (or, in one
repo, which files), the largest first, in a line of bounded length.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

DEFINITION, PATH_MATCH, OTHER = 0, 1, 2
NAMES_MAX = 8  # names of a pattern looked up in the symbol index
WHERE_MAX = 6  # repos (or files) named in the line about what is not shown
NAME_CHARS = 60  # a repo name or path is cut at this length in that line

# Parts of a regex that are not names: escapes (\b, \w, \p{L}, \x41, \.), groups' flags, classes.
_NOT_NAMES = re.compile(r"\\(?:[pP]\{[^}]*\}|x\{[^}]*\}|x[0-9A-Fa-f]{2}|.)|\(\?[A-Za-z-]*[:)]|\[[^\]]*\]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]+")

T = TypeVar("T")


class Located(Protocol):
    @property
    def repo(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def line(self) -> int: ...


M = TypeVar("M", bound=Located)


def names_in_pattern(pattern: str) -> list[str]:
    """The identifiers written in a pattern (`def (enqueue|retry)\\b` → def, enqueue, retry), the
    names whose definitions rank first; at most NAMES_MAX, longest first."""
    names = dict.fromkeys(_NAME.findall(_NOT_NAMES.sub(" ", pattern)))
    return sorted(names, key=len, reverse=True)[:NAMES_MAX]


def interleave(groups: Iterable[Iterable[T]]) -> Iterator[T]:
    """One item of each group in turn, until every group is spent."""
    turns = deque(iter(group) for group in groups)
    while turns:
        group = turns.popleft()
        for item in group:
            yield item
            turns.append(group)
            break


def rank(
    matches: Sequence[M],
    rank_of: Callable[[M], int],
    order: Callable[[str, str], str],
    limit: int,
    named: AbstractSet[str] = frozenset(),
) -> list[M]:
    """The `limit` matches to show, chosen as the module says, grouped for display: files in the
    order of their best-ranked line, lines in a file by number. `order(repo, path)`: the path as
    shown, the only order of paths that may show (a raw name's place would tell its text).
    `named`: the repos the question names, which take the first turn of every round in a rank."""
    in_file = Counter((m.repo, m.path) for m in matches)
    in_repo = Counter(m.repo for m in matches)
    levels: dict[int, dict[tuple[str, str], list[M]]] = {}
    for match in sorted(matches, key=lambda m: m.line):
        levels.setdefault(rank_of(match), {}).setdefault((match.repo, match.path), []).append(match)
    chosen: list[M] = []
    for level in sorted(levels):
        files = levels[level]
        repos: dict[str, list[list[M]]] = {}
        for key in sorted(files, key=lambda k: (-in_file[k], order(*k))):
            repos.setdefault(key[0], []).append(files[key])
        by_repo = sorted(repos, key=lambda repo: (repo not in named, -in_repo[repo], repo))
        for match in interleave(interleave(repos[repo]) for repo in by_repo):
            if len(chosen) == limit:
                break
            chosen.append(match)
    first: dict[tuple[str, str], int] = {}
    for position, match in enumerate(chosen):
        first.setdefault((match.repo, match.path), position)
    return sorted(chosen, key=lambda m: (first[(m.repo, m.path)], m.line))


@dataclass(frozen=True)
class NotShown:
    """The matches counted but not shown."""

    matches: int
    files: int
    by_repo: dict[str, int]  # largest first
    by_file: dict[str, int]  # (in one repo only) path as shown -> lines, largest first
    lower_bound: bool  # some repo was not read to its end: there are more than counted
    partial_repos: list[str]  # the repos counted in part

    def data(self) -> dict[str, Any]:
        return {
            "matches": self.matches,
            "files": self.files,
            "by_repo": self.by_repo,
            "is_lower_bound": self.lower_bound,
            "repos_counted_in_part": self.partial_repos,
        }


def not_shown(
    found: Sequence[Located],
    shown: Sequence[Located],
    partial_repos: set[str],
    lower_bound: bool,
    shown_path: Callable[[str, str], str],
) -> NotShown:
    """What `found` holds that `shown` does not, per repo and (for one repo) per file."""
    shown_keys = {(m.repo, m.path, m.line) for m in shown}
    rest = [m for m in found if (m.repo, m.path, m.line) not in shown_keys]
    by_repo = Counter(m.repo for m in rest)
    by_file = Counter((m.repo, m.path) for m in rest)
    one_repo = len(by_repo) == 1
    return NotShown(
        matches=len(rest),
        files=len(by_file),
        by_repo=dict(sorted(by_repo.items(), key=lambda item: (-item[1], item[0]))),
        by_file=(
            {
                shown_path(*key): n
                for key, n in sorted(by_file.items(), key=lambda i: (-i[1], shown_path(*i[0])))
            }
            if one_repo
            else {}
        ),
        lower_bound=lower_bound or bool(partial_repos),
        partial_repos=sorted(partial_repos),
    )


def _cut(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def not_shown_line(rest: NotShown) -> str:
    """ "Not shown: 1,240 more matching lines in 37 files across 5 repos: payments 900, …"; a
    count that is only a lower bound has a "+"."""
    plus = "+" if rest.lower_bound else ""
    where = f"{rest.files:,} file{'s' if rest.files != 1 else ''}"
    if rest.by_file:
        where += f" of {_cut(next(iter(rest.by_repo)))}"
        parts = [f"{_cut(path)} {n:,}" for path, n in list(rest.by_file.items())[:WHERE_MAX]]
        left = len(rest.by_file) - WHERE_MAX
        tail = f" and {left:,} more file{'s' if left != 1 else ''}" if left > 0 else ""
    else:
        where += f" across {len(rest.by_repo):,} repos"
        parts = [
            f"{_cut(repo)} {n:,}{'+' if repo in rest.partial_repos else ''}"
            for repo, n in list(rest.by_repo.items())[:WHERE_MAX]
        ]
        left = len(rest.by_repo) - WHERE_MAX
        tail = f" and {left:,} more repo{'s' if left != 1 else ''}" if left > 0 else ""
    return f"Not shown: {rest.matches:,}{plus} more matching lines in {where}: {', '.join(parts)}{tail}."
