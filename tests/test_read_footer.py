"""What an answer says it read: each repo's short commit and how old it is, from fixed clocks.

The ages are pure functions of the snapshot's two times and `now` (worker/repos/freshness.py);
the footer (worker/jobs/read_footer.py) and list_repos say them the same way.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from config.repos import RepoSpec
from tests.support.fixture_repos import Corpus, context
from worker.jobs.read_footer import read_footer
from worker.repos.freshness import age_text
from worker.repos.snapshot import Snapshot
from worker.tools.repo_info import commit_age, list_repos

NOW = 1_800_000_000.0
MIN, HOUR, DAY = 60, 3600, 86400


def snapshot(name: str, sha_digit: str, committed_ago: float, fetched_ago: float) -> Snapshot:
    spec = RepoSpec(name=name, url=f"/src/{name}", display_url=f"/src/{name}")
    return Snapshot(spec, sha_digit * 40, "main", Path("/nowhere"), NOW - fetched_ago, NOW - committed_ago)


def test_an_old_commit_fetched_just_now_says_both_ages() -> None:
    assert age_text(NOW - 3 * DAY, NOW - 2 * MIN, NOW) == "committed 3 d ago, fetched 2 min ago"


def test_a_commit_fetched_within_the_same_minute_says_its_age_once() -> None:
    assert age_text(NOW - 190, NOW - 185, NOW) == "committed and fetched 3 min ago"
    assert age_text(NOW - 40, NOW - 12, NOW) == "committed 40 s ago, fetched 12 s ago"


def test_a_commit_dated_after_its_fetch_is_not_believed() -> None:
    future = NOW + 365 * DAY  # anyone who can push can date a commit so
    assert age_text(future, NOW - 5 * MIN, NOW) == (
        "fetched 5 min ago (commit date not shown: it is later than the fetch)"
    )
    assert age_text(NOW - 90, NOW - 2 * MIN, NOW) == "committed 1 min ago, fetched 2 min ago"  # skewed clocks


def test_the_footer_names_the_commit_read_and_its_age() -> None:
    read = {"payments": snapshot("payments", "a", 3 * DAY, 2 * MIN)}
    assert read_footer(read, {}, set(), NOW) == (
        "_Read `payments` at `aaaaaaa` (committed 3 d ago, fetched 2 min ago)._"
    )


def test_a_footer_for_five_repos_names_three_and_counts_the_rest() -> None:
    read = {name: snapshot(name, digit, HOUR, HOUR) for name, digit in zip("vwxyz", "12345", strict=True)}
    footer = read_footer(read, {}, {"z"}, NOW)
    assert footer == (
        "_Read `z` at `5555555` (committed and fetched 1 h ago), `v` at `1111111` (committed and fetched "
        "1 h ago), `w` at `2222222` (committed and fetched 1 h ago), "
        "2 more repo(s) (`/codebot repos` lists their commits)._"
    )


def test_a_refresh_under_way_to_a_newer_commit_is_said_and_one_to_the_commit_read_is_not() -> None:
    read = {"payments": snapshot("payments", "a", DAY, DAY), "web": snapshot("web", "b", HOUR, HOUR)}
    footer = read_footer(read, {"payments": "c" * 40, "web": "b" * 40}, set(), NOW)
    assert footer.splitlines() == [
        "_Read `payments` at `aaaaaaa` (committed and fetched 1 d ago), "
        "`web` at `bbbbbbb` (committed and fetched 1 h ago)._",
        "_A refresh to a newer commit is under way for `payments` (to `ccccccc`): asking again shortly reads it._",
    ]


def test_list_repos_says_each_commits_age_and_when_it_was_fetched(corpus: Corpus) -> None:
    ctx = context(corpus, "app")
    app = dataclasses.replace(ctx.snapshots["app"], committed_at=NOW - 2 * DAY, created_at=NOW - 5 * MIN)
    assert commit_age(app, NOW) == "committed 2 d ago, fetched 5 min ago; commit date 2027-01-13"
    # list_repos reads the real clock: a commit two days older than its fetch says both ages,
    # however long the fixture repo has existed (on a loaded machine, minutes)
    fetched = time.time() - 5 * MIN
    ctx.snapshots["app"] = dataclasses.replace(app, committed_at=fetched - 2 * DAY, created_at=fetched)
    listing = list_repos(ctx)
    assert f"@ {corpus.app.sha[:7]} (committed 2 d ago, fetched 5 min ago; " in listing.text
    (row,) = listing.data["repos"]
    assert row["fetched_at"].endswith("Z") and row["committed_at"].endswith("Z")
