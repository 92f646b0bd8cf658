"""search: real ripgrep, correct line numbers, caps that say what was cut, and safe patterns."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from config.settings import load_settings
from tests.support.fixture_repos import NEEDLE_LINES, Corpus, context, make_repo, snapshot_repo
from worker.repos.ripgrep import find_ripgrep
from worker.repos.snapshot import Snapshot
from worker.tools import build_registry, make_context
from worker.tools.context import ToolError
from worker.tools.search import ripgrep_binary, search


def test_matches_come_with_paths_and_line_numbers_and_are_recorded_as_shown(corpus: Corpus) -> None:
    ctx = context(corpus)
    result = search(ctx, r"def retry_job|class Queue")
    assert "app:src/app.py" in result.text
    assert "      4│ def retry_job(job):" in result.text and "      8│ class Queue:" in result.text
    assert [(m["path"], m["line"]) for m in result.data["matches"]] == [("src/app.py", 4), ("src/app.py", 8)]
    assert ctx.shown.covers("app", "src/app.py", 4, 4) and ctx.shown.covers("app", "src/app.py", 8, 8)
    assert not ctx.shown.covers("app", "src/app.py", 5, 5)


def test_more_matches_than_the_cap_are_counted_and_the_notice_says_how_many(corpus: Corpus) -> None:
    result = search(context(corpus, search_count_limit=5000), "needle", glob="many.txt")
    assert len(result.data["matches"]) == 50 and result.data["total"] == NEEDLE_LINES
    assert f"Showing 50 of {NEEDLE_LINES:,} matching lines" in result.text
    capped = search(context(corpus), "needle")  # the default count limit is 1000
    assert "Showing 50 of more than 1,000" in capped.text and capped.data["total_is_lower_bound"]


def test_a_catastrophic_backtracking_pattern_returns_fast(corpus: Corpus) -> None:
    # ripgrep's engine is linear: ~0.1 s each (~1 s on a machine 8x slower). A backtracking
    # engine would run into the 10 s search timeout: its results would be marked partial.
    for pattern in ["(a+)+$", "(a|aa)+!", "(a*)*b"]:
        assert search(context(corpus), pattern).data["timed_out"] is False, pattern


def test_an_invalid_regex_is_an_error_with_ripgreps_reason_and_a_hint(corpus: Corpus) -> None:
    with pytest.raises(ToolError) as caught:
        search(context(corpus), "retry(")
    assert "unclosed group" in str(caught.value) and "escape" in str(caught.value)
    with pytest.raises(ToolError, match="give a pattern"):
        search(context(corpus), "")


def test_no_match_says_so_and_suggests_what_to_try(corpus: Corpus) -> None:
    result = search(context(corpus), "zzz_not_there_zzz")
    assert "No matches" in result.text and "ignore_case" in result.text and "|" in result.text
    assert "No file in repo app matches glob" in search(context(corpus), "x", glob="*.nothing").text


def test_a_pattern_starting_with_a_dash_is_a_pattern_not_an_option(corpus: Corpus) -> None:
    result = search(context(corpus), "-rf")
    assert [(m["path"], m["line"]) for m in result.data["matches"]] == [("scripts/clean.sh", 2)]


def test_gitignored_and_secret_files_are_skipped_even_when_a_glob_names_them(corpus: Corpus) -> None:
    assert search(context(corpus), "GITIGNORED_MARKER").data["total"] == 0
    for glob in [".env", "**/.env", "id_rsa", "*.pem", ".git/**"]:
        result = search(context(corpus), "PASSWORD|PRIVATE|BEGIN", glob=glob)
        assert result.data["total"] == 0, glob
    only_py = search(context(corpus), "retry", glob="*.py")
    assert {m["path"] for m in only_py.data["matches"]} == {"src/app.py"}


def test_ignore_case_and_unicode_and_all_repos_in_scope(corpus: Corpus) -> None:
    assert search(context(corpus), "RETRY_JOB").data["total"] == 0
    assert search(context(corpus), "RETRY_JOB", ignore_case=True).data["total"] == 1
    assert search(context(corpus), "Grüße").data["matches"][0]["path"] == "docs/überblick.md"
    both = search(context(corpus, "app", "sibling"), "^# ")
    assert {m["repo"] for m in both.data["matches"]} == {"app", "sibling"}


def test_long_lines_are_cut_with_a_marker(corpus: Corpus) -> None:
    match = search(context(corpus), "a!$").data["matches"][0]
    assert match["path"] == "data/long_line.txt"
    assert match["text"].startswith("a" * 300) and match["text"].endswith(
        "…[line cut: longer than 1,200 bytes]"
    )


def test_a_search_past_its_deadline_is_stopped_and_says_so(corpus: Corpus) -> None:
    result = search(context(corpus, search_timeout_seconds=0.000001), "needle")
    assert result.data["timed_out"] and "timed out" in result.text


def test_a_search_that_runs_out_of_time_before_any_match_never_says_no_matches(corpus: Corpus) -> None:
    result = search(context(corpus, search_timeout_seconds=0.000001), "no such text anywhere")
    assert result.data["timed_out"] and result.data["total"] == 0
    assert "No matches" not in result.text
    assert "timed out" in result.text and "matches may exist" in result.text


@pytest.fixture(scope="module")
def adversarial(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Snapshot]:
    base = tmp_path_factory.mktemp("adversarial")
    files = {
        "one_line.txt": "x" * 1_900_000 + "\n",  # a 1.9 MB line, every byte a match
        "short_lines.txt": "y\n" * 1_000_000,  # a million short lines
        "odd\nname.py": "needle in a file whose name holds a newline\n",
        "after.py": "needle after it\n",
    }
    make_repo(base / "adv", files)
    return {"app": snapshot_repo(base / "adv", "app", base / "snapshots" / "app")}


def test_a_megabyte_line_of_matches_is_one_matching_line_shown_cut(adversarial: dict[str, Snapshot]) -> None:
    result = search(make_context(load_settings(env_file=None), adversarial), "x", glob="one_line.txt")
    assert not result.data["timed_out"] and result.data["total"] == 1
    [match] = result.data["matches"]
    assert match["line"] == 1 and match["text"].startswith("x" * 300) and "[line cut:" in match["text"]


def test_a_million_matching_short_lines_stop_at_the_count_limit(adversarial: dict[str, Snapshot]) -> None:
    ctx = make_context(load_settings(env_file=None), adversarial)
    result = search(ctx, "^y$", glob="short_lines.txt")
    assert result.data["total"] == ctx.settings.search_count_limit and result.data["total_is_lower_bound"]
    assert [m["line"] for m in result.data["matches"]][:3] == [1, 2, 3]
    assert "Showing 50 of more than 1,000 matching lines" in result.text


def test_a_path_with_a_newline_keeps_its_name_and_the_next_file_its_own(
    adversarial: dict[str, Snapshot],
) -> None:
    result = search(make_context(load_settings(env_file=None), adversarial), "needle")
    assert sorted(m["path"] for m in result.data["matches"]) == ["after.py", "odd\nname.py"]


def test_a_repeated_identical_search_is_answered_from_the_cache(corpus: Corpus) -> None:
    registry, ctx = build_registry(), context(corpus)
    first = registry.call(ctx, "search", {"pattern": "retry"})
    second = registry.call(ctx, "search", '{"pattern": "retry"}')
    assert second.text.startswith("(You already ran this exact search") and second.data == first.data
    assert len(ctx.result_cache) == 1


def test_a_missing_ripgrep_binary_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    find_ripgrep.cache_clear()
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    try:
        with pytest.raises(ToolError, match=r"ripgrep binary \(rg\) is not installed"):
            ripgrep_binary()
    finally:
        find_ripgrep.cache_clear()  # the next test finds the real one again
