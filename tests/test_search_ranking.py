"""search over several repos: the lines shown are chosen by relevance and spread over repos and
files, never the alphabetically first; what is not shown is counted, per repo."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from config.settings import load_settings
from tests.support.fixture_repos import make_repo, snapshot_repo
from worker.repos.ripgrep import find_ripgrep
from worker.repos.snapshot import Snapshot
from worker.tools import make_context
from worker.tools.context import ToolContext, repos_named_in
from worker.tools.search import search
from worker.tools.search_ranking import not_shown, not_shown_line
from worker.tools.search_run import Match

# alpha sorts first and holds most of the matches; gamma, last, defines make_widget
REPO_FILES: dict[str, dict[str, str | bytes]] = {
    "alpha": {
        **{f"src/mod{i}.py": "".join(f"value = widget_count + {n}\n" for n in range(30)) for i in range(10)},
        **{f"src/calls{i}.py": "".join(f"make_widget()  # call {n}\n" for n in range(20)) for i in range(5)},
    },
    "beta": {f"notes/n{i}.txt": "".join(f"a widget here {n}\n" for n in range(10)) for i in range(4)},
    "gamma": {
        "lib/factory.py": "import os\n\n\ndef make_widget():\n    return 'widget'\n",
        "docs/widget_guide.md": "# Guide\n\nUse a widget.\n",
    },
}


@pytest.fixture(scope="module")
def org(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Snapshot]]:
    base = tmp_path_factory.mktemp("org")
    snapshots = {}
    for name, files in REPO_FILES.items():
        make_repo(base / "repos" / name, files)
        snapshots[name] = snapshot_repo(base / "repos" / name, name, base / "snapshots" / name)
    return base, snapshots


def _context(org: tuple[Path, dict[str, Snapshot]], **overrides: Any) -> ToolContext:
    base, snapshots = org
    return make_context(load_settings(env_file=None, data_dir=base / "data", **overrides), snapshots)


def test_a_common_word_over_three_repos_shows_lines_of_every_repo_and_no_file_fills_the_list(
    org: tuple[Path, dict[str, Snapshot]],
) -> None:
    matches = search(_context(org), "widget").data["matches"]
    in_repo = Counter(m["repo"] for m in matches)
    in_file = Counter((m["repo"], m["path"]) for m in matches)
    assert len(matches) == 50 and set(in_repo) == {"alpha", "beta", "gamma"}
    assert max(in_repo.values()) <= 25  # alpha holds 400 of the 443 matching lines
    assert len([key for key in in_file if key[0] == "alpha"]) == 15  # every file of alpha
    assert max(in_file.values()) <= 6


def test_the_count_limit_is_shared_so_the_first_repo_read_cannot_use_it_all(
    org: tuple[Path, dict[str, Snapshot]],
) -> None:
    result = search(_context(org, search_count_limit=100), "widget")
    assert set(result.data["counted_by_repo"]) == {"alpha", "beta", "gamma"}
    assert set(Counter(m["repo"] for m in result.data["matches"])) == {"alpha", "beta", "gamma"}
    assert result.data["counted_by_repo"]["beta"] == 40  # read again with what gamma left over
    assert result.data["total_is_lower_bound"]
    assert result.data["not_shown"]["repos_counted_in_part"] == ["alpha"]
    not_shown = result.text.split("\n")[1]
    assert not_shown.startswith("Not shown: ") and "+ more matching lines" in not_shown
    assert "alpha 10+" in not_shown


def test_the_not_shown_line_counts_exactly_what_ripgrep_counts(org: tuple[Path, dict[str, Snapshot]]) -> None:
    result = search(_context(org), "widget")
    in_file: Counter[tuple[str, str]] = Counter()
    for name, snapshot in org[1].items():
        counts = subprocess.run(
            [find_ripgrep(), "--count", "--no-config", "-e", "widget"],
            cwd=snapshot.root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for row in counts.splitlines():
            path, count = row.rsplit(":", 1)
            in_file[(name, path)] = int(count)
    shown = Counter((m["repo"], m["path"]) for m in result.data["matches"])
    left = {key: n - shown[key] for key, n in in_file.items() if n > shown[key]}
    by_repo = Counter({repo: sum(n for (r, _), n in left.items() if r == repo) for repo in REPO_FILES})
    assert result.data["total"] == sum(in_file.values()) == 443 and not result.data["total_is_lower_bound"]
    assert result.data["not_shown"]["matches"] == sum(left.values()) == 443 - 50
    assert result.data["not_shown"]["by_repo"] == {repo: n for repo, n in by_repo.most_common() if n}
    assert result.data["counted_by_repo"] == {
        repo: sum(n for (r, _), n in in_file.items() if r == repo) for repo in REPO_FILES
    }
    assert (
        f"Not shown: {443 - 50:,} more matching lines in {len(left)} files across {len([n for n in by_repo.values() if n])} repos: alpha "
        in result.text
    )


def test_a_definition_of_the_searched_name_is_shown_first(org: tuple[Path, dict[str, Snapshot]]) -> None:
    result = search(_context(org), "make_widget")
    assert result.data["total"] == 101  # 100 calls in alpha, one definition in gamma
    first = result.data["matches"][0]
    assert (first["repo"], first["path"], first["line"]) == ("gamma", "lib/factory.py", 4)
    assert result.text.split("\n")[2:4] == ["gamma:lib/factory.py", "      4│ def make_widget():"]


def test_a_file_whose_path_matches_the_pattern_comes_before_other_files(
    org: tuple[Path, dict[str, Snapshot]],
) -> None:
    matches = search(_context(org), "widget").data["matches"]
    assert (matches[0]["repo"], matches[0]["path"]) == ("gamma", "docs/widget_guide.md")
    assert [m["path"] for m in matches].count("docs/widget_guide.md") == 1


def test_the_not_shown_line_stays_short_however_many_repos_and_however_long_their_names() -> None:
    long_names = [f"{'r' * 500}-{i}" for i in range(20)]
    found = [Match(repo, "a.py", n, "x") for i, repo in enumerate(long_names) for n in range(1, i + 2)]
    rest = not_shown(found, found[:3], {long_names[19]}, False, lambda _repo, path: path)
    line = not_shown_line(rest)
    assert rest.matches == len(found) - 3 and rest.lower_bound and len(rest.by_repo) == 18
    assert line.startswith(f"Not shown: {len(found) - 3}+ more matching lines in 18 files across 18 repos: ")
    assert line.endswith(" and 12 more repos.") and len(line) < 600
    assert line.count("…") == 6 and f"{'r' * 59}… 20+" in line  # the largest first, counted in part


def test_a_repo_the_question_names_is_shown_first_though_it_holds_the_fewest_matches(
    org: tuple[Path, dict[str, Snapshot]],
) -> None:
    base, snapshots = org
    settings = load_settings(env_file=None, data_dir=base / "data", search_max_results=2)
    unnamed = make_context(settings, snapshots, question="where is a widget counted?")
    named = make_context(settings, snapshots, question="Where does Gamma use a widget?")
    assert named.named_repos == {"gamma"} and unnamed.named_repos == set()
    # gamma holds 1 of the 341 lines; alpha 300, beta 40
    assert [m["repo"] for m in search(unnamed, "a widget|widget_count").data["matches"]] == ["alpha", "beta"]
    shown = search(named, "a widget|widget_count").data["matches"]
    assert [m["repo"] for m in shown] == ["gamma", "alpha"]


def test_a_repo_is_named_only_by_its_whole_name() -> None:
    names = ["payments-api", "web", "api"]
    assert repos_named_in("how does payments-api retry?", names) == {"payments-api"}
    assert repos_named_in("is payments-api-v2 or payments-api.py the web one?", names) == {"web"}
    assert repos_named_in("The API of WEB.", names) == {"api", "web"}
