"""read_file and list_files: numbered lines, caps that say how to go on, and honest listings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from config.settings import load_settings
from tests.support.fixture_repos import HUGE_LINES, Corpus, context, make_repo, snapshot_repo
from worker.repos.manifest import manifest_path
from worker.tools import make_context
from worker.tools.context import ToolError
from worker.tools.files import read_file
from worker.tools.listing import list_files


def test_lines_are_numbered_and_exactly_the_shown_lines_are_recorded(corpus: Corpus) -> None:
    ctx = context(corpus)
    result = read_file(ctx, "app", "src/app.py", start_line=4, end_line=5)
    assert result.text.splitlines() == [
        "app:src/app.py lines 4-5 of 9",
        "4│ def retry_job(job):",
        "5│     return job.retry()",
    ]
    assert result.data["lines"] == [
        {"line": 4, "text": "def retry_job(job):"},
        {"line": 5, "text": "    return job.retry()"},
    ]
    assert ctx.shown.covers("app", "src/app.py", 4, 5)
    assert not ctx.shown.covers("app", "src/app.py", 3, 3) and not ctx.shown.covers("app", "src/app.py", 6, 6)


def test_a_long_read_is_capped_with_the_start_line_to_continue_from(corpus: Corpus) -> None:
    ctx = context(corpus, read_max_lines=100)
    first = read_file(ctx, "app", "many.txt")
    assert first.data["end_line"] == 100 and "call read_file with start_line=101 to continue" in first.text
    assert read_file(ctx, "app", "many.txt", start_line=101).data["lines"][0] == {
        "line": 101,
        "text": "needle 101",
    }
    by_chars = read_file(context(corpus, read_max_chars=300), "app", "many.txt")
    assert len(by_chars.text) < 500 and "capped at 300 characters" in by_chars.text


def test_bad_line_numbers_are_clamped_or_explained(corpus: Corpus) -> None:
    ctx = context(corpus)
    assert read_file(ctx, "app", "src/app.py", start_line=-5, end_line=1).data["start_line"] == 1
    with pytest.raises(ToolError, match=r"start_line 50 is past the end: 'src/app.py' has 9 lines"):
        read_file(ctx, "app", "src/app.py", start_line=50)
    with pytest.raises(ToolError, match=r"end_line \(2\) is before start_line \(5\)"):
        read_file(ctx, "app", "src/app.py", start_line=5, end_line=2)
    assert "[the file ends at line 9]" in read_file(ctx, "app", "src/app.py", start_line=8, end_line=99).text
    assert "is empty (0 lines)" in read_file(ctx, "app", "data/empty.txt").text


def test_binary_files_are_described_and_bad_utf8_is_replaced(corpus: Corpus) -> None:
    binary = read_file(context(corpus), "app", "assets/logo.png")
    assert "binary file (PNG image, 1.0 KB)" in binary.text and binary.data["binary"]
    assert "\x89PNG" not in binary.text
    assert (
        read_file(context(corpus), "app", "data/latin1.txt").data["lines"][0]["text"]
        == "caf\ufffd cr\ufffdme"
    )


def test_a_five_megabyte_file_is_streamed_not_cached(corpus: Corpus) -> None:
    ctx = context(corpus)
    result = read_file(ctx, "app", "big/huge.txt", start_line=HUGE_LINES - 1)
    assert (
        result.text.splitlines()[0] == f"app:big/huge.txt lines {HUGE_LINES - 1}-{HUGE_LINES} of {HUGE_LINES}"
    )
    assert result.data["lines"][-1]["text"].startswith(f"line {HUGE_LINES:09d}")
    assert ("app", "big/huge.txt") not in ctx.file_cache


def test_a_file_is_read_from_disk_once_per_question(tmp_path: Path) -> None:
    make_repo(tmp_path / "repo", {"a.py": "one\ntwo\n"})
    snapshot = snapshot_repo(tmp_path / "repo", "r", tmp_path / "snapshots" / "r")
    ctx = make_context(load_settings(env_file=None), {"r": snapshot})
    assert read_file(ctx, "r", "a.py").data["lines"][1]["text"] == "two"
    (snapshot.root / "a.py").write_text("changed\n")
    assert read_file(ctx, "r", "a.py", start_line=2).data["lines"][0]["text"] == "two"
    assert ctx.file_cache[("r", "a.py")] == ["one", "two"]


def test_an_unknown_path_suggests_close_names(corpus: Corpus) -> None:
    with pytest.raises(ToolError) as caught:
        read_file(context(corpus), "app", "src/clinets.py")
    assert "does not exist" in str(caught.value) and "'src/clients.py'" in str(caught.value)
    assert "list_files" in str(caught.value)
    with pytest.raises(ToolError, match="is a folder; call list_files"):
        read_file(context(corpus), "app", "src")


def test_a_folder_listing_marks_folders_hides_secrets_and_never_reveals_outside_link_targets(
    corpus: Corpus,
) -> None:
    result = list_files(context(corpus), "app")
    lines = result.text.splitlines()
    assert "src/  (3 entries)" in lines and "many.txt  (16.5 KB)" in lines
    assert "etc_passwd -> (outside the repo; not readable)" in lines
    assert "sibling_dir -> (outside the repo; not readable)" in lines
    assert not {line.split()[0] for line in lines} & {".env", "id_rsa", ".git/"}
    assert "/etc/passwd" not in result.text and "snapshots" not in result.text
    # .env, id_rsa, config/server.pem and the link env_link.txt -> .env never entered the snapshot.
    assert "[4 secret or credentials file(s) in this repo are withheld" in result.text
    assert list_files(context(corpus), "app", "docs").data["entries"][1]["target"] == "README.md"


def test_a_glob_lists_matching_files_at_any_depth_with_a_cap(corpus: Corpus) -> None:
    result = list_files(context(corpus), "app", glob="*.py")
    assert [e["path"] for e in result.data["entries"]] == [
        "build/generated.py",
        "src/app.py",
        "src/clients.py",
        "src/数据.py",
    ]
    assert list_files(context(corpus), "app", "src", glob="app.*").data["total"] == 1
    assert list_files(context(corpus), "app", glob="*.pem").data["total"] == 0
    capped = list_files(context(corpus, list_max_entries=2), "app", glob="*")
    assert len(capped.data["entries"]) == 2 and "[showing 2 of" in capped.text
    with pytest.raises(ToolError, match="is a file, not a folder"):
        list_files(context(corpus), "app", "README.md")


def test_a_glob_over_a_big_tree_counts_every_match_from_the_manifest_without_a_walk(tmp_path: Path) -> None:
    make_repo(tmp_path / "repo", {f"pkg/m{n:03d}.py": "x = 1\n" for n in range(150)} | {"pkg/a.txt": "t"})
    snapshot = snapshot_repo(tmp_path / "repo", "r", tmp_path / "snapshots" / "r")
    ctx = make_context(load_settings(env_file=None, list_walk_max_entries=100), {"r": snapshot})
    result = list_files(ctx, "r", path="pkg", glob="m1*.py")
    assert "files matching 'm1*.py': 50" in result.text and "stopped after" not in result.text
    assert [e["path"] for e in result.data["entries"]][:2] == ["pkg/m100.py", "pkg/m101.py"]
    assert result.data["entries"][0]["size_bytes"] == 6


def test_a_missing_path_is_answered_with_same_named_files_and_close_names_from_the_manifest(
    tmp_path: Path,
) -> None:
    make_repo(tmp_path / "repo", {"src/utils.py": "u", "lib/deep/config.py": "c", "src/app.py": "a"})
    snapshot = snapshot_repo(tmp_path / "repo", "r", tmp_path / "snapshots" / "r")
    ctx = make_context(load_settings(env_file=None), {"r": snapshot})
    with pytest.raises(ToolError, match=re.escape("Did you mean: 'lib/deep/config.py'?")):
        read_file(ctx, "r", "config.py")
    with pytest.raises(ToolError, match=re.escape("Did you mean: 'src/utils.py'")):
        read_file(ctx, "r", "src/util.py")


def test_a_snapshot_without_a_manifest_is_walked_and_a_partial_count_says_so(tmp_path: Path) -> None:
    make_repo(tmp_path / "repo", {f"pkg/m{n:03d}.py": "x = 1\n" for n in range(150)})
    snapshot = snapshot_repo(tmp_path / "repo", "r", tmp_path / "snapshots" / "r")
    manifest_path(snapshot.root).unlink()  # as a snapshot built by an earlier release
    ctx = make_context(load_settings(env_file=None, list_walk_max_entries=100), {"r": snapshot})
    result = list_files(ctx, "r", glob="*.py")
    assert "files matching '*.py': at least 99" in result.text
    assert "stopped after looking at 100 entries" in result.text
