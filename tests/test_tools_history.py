"""log, blame, show and diff as the model sees them, over a real mirror of a repo with history."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.git_remote import GitRemote, make_mirrors, silent_server
from tests.support.history_repo import HistoryRepo, Mirrored, build_history_repo, mirrored
from worker.repos.git_read import GitProcess, GitReadError
from worker.tools import build_registry, make_context

REGISTRY = build_registry()


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> HistoryRepo:
    return build_history_repo(tmp_path_factory.mktemp("history"))


@pytest.fixture(scope="module")
def app(history: HistoryRepo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mirrored]:
    with mirrored(history, tmp_path_factory.mktemp("mirror")) as served:
        yield served


def call(app: Mirrored, name: str, **arguments: object) -> str:
    outcome = REGISTRY.call(app.context(), name, {"repo": "app", **arguments})
    assert outcome.ok, outcome.text
    return outcome.text


def test_log_of_a_path_lists_the_commits_that_changed_it_newest_first_with_author_names(
    app: Mirrored,
) -> None:
    shas = app.repo.shas

    listed = call(app, "log", path="src/retry.py")

    lines = [line for line in listed.splitlines() if line[:10] in {s[:10] for s in shas.values()}]
    # the merge took the file from its branch unchanged: history simplification leaves it out
    assert [line[:10] for line in lines] == [shas[n][:10] for n in ("jitter", "raise", "add")]
    assert "Alan Turing: Raise MAX_ATTEMPTS to 5 for flaky networks" in listed
    assert "@example.invalid" not in listed  # names only, unless history_show_emails


def test_log_finds_when_a_value_appeared_by_what_the_commits_changed_or_said(app: Mirrored) -> None:
    shas = app.repo.shas

    changed = call(app, "log", query="MAX_ATTEMPTS = 5", match="diff")
    said = call(app, "log", query="flaky networks", match="message")
    by_regex = call(app, "log", query="random\\.random", regex=True)

    assert shas["raise"][:10] in changed and shas["add"][:10] not in changed
    assert said.count("\n") == 1 and shas["raise"][:10] in said
    assert shas["jitter"][:10] in by_regex and "[matched in the diff]" in by_regex


def test_log_takes_dates_tags_and_a_limit_and_says_when_more_exist(app: Mirrored) -> None:
    shas = app.repo.shas

    since_tag = call(app, "log", since="v2.0")
    limited = call(app, "log", limit=2)
    future = call(app, "log", since="2999-01-01")

    assert shas["raise"][:10] not in since_tag and shas["remove"][:10] in since_tag
    assert limited.startswith("2 commit(s)") and "more commits exist" in limited
    assert "(none)" in future


def test_blame_names_the_last_commit_of_each_range_with_the_snapshot_lines(app: Mirrored) -> None:
    shas = app.repo.shas

    blamed = call(app, "blame", path="src/retry.py", start_line=1, end_line=4)

    head, *rest = blamed.splitlines()
    assert head.startswith("blame of app:src/retry.py lines 1-4 of 12")
    assert rest[0].startswith(f"L1-L2 · {shas['add'][:10]}") and "Ada Lovelace" in rest[0]
    assert rest[3].startswith(f"L3 · {shas['raise'][:10]}") and "Alan Turing: Raise MAX_ATTEMPTS" in rest[3]
    assert rest[4] == "  3│ MAX_ATTEMPTS = 5"


def test_show_gives_the_message_the_stat_and_the_diff_with_both_line_numbers(app: Mirrored) -> None:
    shown = call(app, "show", sha=app.repo.shas["raise"][:8])

    assert "Author: Alan Turing" in shown and "    The payment gateway drops one call in twenty." in shown
    assert "  M  +1 -1  src/retry.py" in shown
    assert "\n 3    │- MAX_ATTEMPTS = 3\n    3 │+ MAX_ATTEMPTS = 5\n" in shown


def test_show_of_a_merge_diffs_against_the_first_parent_and_head_means_the_snapshot(app: Mirrored) -> None:
    shown = call(app, "show", sha="HEAD")

    assert f"commit {app.repo.shas['merge']} of app (a merge)" in shown
    assert (
        "what the merge brought in" in shown and "README.md" not in shown
    )  # not the first parent's own change
    assert "│+             time.sleep(backoff * 2**attempt + random.random())" in shown


def test_diff_between_tags_gives_the_stat_first_then_the_changes(app: Mirrored) -> None:
    changes = call(app, "diff", **{"from": "v1.0", "to": "v2.0"})

    stat_at, changes_at = changes.index("file(s) changed"), changes.index("── src/retry.py (modified)")
    assert stat_at < changes_at
    assert f"to v2.0 ({app.repo.shas['raise'][:10]}" in changes
    one_file = call(app, "diff", **{"from": "v1.0", "path": "README.md"})
    assert "1 file(s) changed" in one_file and "src/retry.py" not in one_file


def test_bad_refs_and_paths_get_errors_the_model_can_act_on(app: Mirrored) -> None:
    cases = {
        ("show", "sha", "v9.9"): "is not in the history of app here",
        ("show", "sha", "abc1234"): "give more of its digits",
        ("diff", "from", "HEAD..main"): "no ranges, options or paths",
        ("log", "since", "last tuesday"): "is not something codebot can look up",
        ("log", "match", "everything"): "match must be one of",
        ("blame", "path", "src/nope.py"): "does not exist in repo 'app'",
    }
    for (tool, parameter, value), message in cases.items():
        extra = (
            {"query": "x"} if parameter == "match" else {"path": "src/retry.py"} if tool == "blame" else {}
        )
        outcome = REGISTRY.call(app.context(), tool, {"repo": "app", **extra, parameter: value})
        assert not outcome.ok and message in outcome.text, (tool, value, outcome.text)
    tags = REGISTRY.call(app.context(), "show", {"repo": "app", "sha": "v9.9"}).text
    assert "Recent tags: " in tags and "v2.0" in tags


def test_emails_are_shown_only_when_the_setting_allows(app: Mirrored) -> None:
    outcome = REGISTRY.call(app.context(history_show_emails=True), "log", {"repo": "app", "limit": 1})

    assert "Ada Lovelace <ada@example.invalid>" in outcome.text


def test_a_shallow_mirror_says_where_its_history_ends(history: HistoryRepo, tmp_path: Path) -> None:
    with mirrored(history, tmp_path, history_depth=2) as shallow:
        listed = REGISTRY.call(shallow.context(), "log", {"repo": "app"}).text
        edge = REGISTRY.call(shallow.context(), "show", {"repo": "app", "sha": history.shas["tidy"]}).text
        old = REGISTRY.call(shallow.context(), "show", {"repo": "app", "sha": history.shas["add"]}).text

    assert listed.startswith("3 commit(s)") and "keeps its last 2 commits (history_depth)" in listed
    assert "at the edge of the mirror's history" in edge and "Changes" not in edge
    assert "is not in the history of app here" in old and "keeps its last 2 commits" in old


def test_a_git_command_that_hangs_is_stopped_at_its_timeout(tmp_path: Path, history: HistoryRepo) -> None:
    with silent_server() as url, GitProcess(history.bare, ["ls-remote", url], 1.0, 10_000) as proc:
        list(proc.chunks())
        with pytest.raises(GitReadError, match="took longer than 1 s"):
            proc.finish()


def test_a_diff_over_the_output_cap_and_the_reply_cap_is_cut_with_a_notice(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    remote.commit({"big.txt": "".join(f"line {n}\n" for n in range(5000)), "small.txt": "hi\n"})
    mirrors = make_mirrors(tmp_path, [{"name": "app", "url": str(remote.bare), "branch": "main"}])
    mirrors.sync("app")
    settings = mirrors.settings.model_copy(update={"history_output_max_bytes": 10_000})

    with mirrors.lease(["app"]) as snapshots:
        outcome = REGISTRY.call(make_context(settings, snapshots), "show", {"repo": "app", "sha": "HEAD"})

    assert outcome.ok and len(outcome.text) <= settings.tool_output_max_chars
    assert "git's output was cut (history_output_max_bytes)" in outcome.text
    assert "  A  +5000 -0  big.txt" in outcome.text and "line 10" in outcome.text


def test_show_of_the_first_commit_lists_every_file_it_added(app: Mirrored) -> None:
    shown = call(app, "show", sha="v1.0")

    assert "3 file(s) changed" in shown and "  A  +12 -0  src/retry.py" in shown
    assert "\n    1 │+ import random\n" in shown and "   12 │+     raise RuntimeError('gave up')" in shown


def test_a_log_query_looks_at_a_bounded_number_of_commits_and_says_where_it_stopped(app: Mirrored) -> None:
    shas = app.repo.shas
    ctx = app.context(history_log_query_max_commits=3)  # the newest three: merge, jitter, tidy

    near = REGISTRY.call(ctx, "log", {"repo": "app", "query": "jitter"})
    far = REGISTRY.call(ctx, "log", {"repo": "app", "query": "MAX_ATTEMPTS = 5"})

    assert near.ok and near.text.startswith("2 commit(s)") and shas["jitter"][:10] in near.text
    assert far.ok and far.text.startswith("0 commit(s)")  # "raise" is the fourth newest
    assert "the search looked at the newest 3 commits only" in far.text and "narrow the search" in far.text
