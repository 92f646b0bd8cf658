"""The symbol index is bounded: a file too large to parse is listed as not indexed (the sync
goes on, the rest is indexed), and repo_overview says which languages have navigation."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.settings import load_settings
from tests.support.fixture_repos import git, make_repo, snapshot_repo
from worker.repos.blobstore import BlobStore
from worker.repos.snapshot import Snapshot
from worker.tools import build_registry, make_context

HUGE_CLASS = "public class Huge {\n" + "    int f() { return 1; }\n" * 400 + "}\n"  # ~10 kB
FILES = {
    "src/Small.java": "public class Small {\n    int size() { return Huge.count(); }\n}\n",
    "src/Huge.java": HUGE_CLASS,
    "scripts/build.sh": "build() {\n  make\n}\n",
    "docs/notes.md": "# notes\n",
    "src/legacy.lua": "function legacy() return 1 end\n",
}


def snapshot(tmp_path: Path) -> tuple[Snapshot, dict[str, object]]:
    make_repo(tmp_path / "repos" / "app", FILES)
    overrides: dict[str, object] = {"symbols_max_file_bytes": 5_000, "data_dir": tmp_path / "data"}
    settings = load_settings(env_file=None, **overrides)
    return snapshot_repo(
        tmp_path / "repos" / "app", "app", tmp_path / "snapshots" / "app", settings=settings
    ), overrides


def call(snap: Snapshot, overrides: dict[str, object], tool: str, **arguments: object) -> tuple[str, dict]:
    ctx = make_context(load_settings(env_file=None, **overrides), {"app": snap})
    outcome = build_registry().call(ctx, tool, dict(arguments))
    return outcome.text, dict(outcome.data or {})


def test_a_file_too_large_to_parse_is_listed_as_not_indexed_and_the_rest_is_indexed(tmp_path: Path) -> None:
    snap, overrides = snapshot(tmp_path)

    small, _ = call(snap, overrides, "find_definition", symbol="Small")
    huge, _ = call(snap, overrides, "find_definition", symbol="Huge")
    overview, data = call(snap, overrides, "repo_overview", repo="app")

    assert "class Small (Java), lines 1-3" in small
    assert "no definition of 'Huge'" in huge
    assert "not indexed: src/Huge.java (larger than symbols_max_file_bytes (4.9 KB)" in huge
    assert "2 files indexed; 1 not indexed (src/Huge.java: larger than symbols_max_file_bytes" in overview
    assert data["navigation"] == {
        "indexed": 2,
        "not_indexed": [
            {
                "path": "src/Huge.java",
                "language": "Java",
                "reason": "larger than symbols_max_file_bytes (4.9 KB)",
            }
        ],
    }
    assert (
        "Huge.java" in call(snap, overrides, "read_file", path="src/Huge.java", repo="app")[0]
    )  # still readable


def test_repo_overview_shows_each_languages_share_and_which_have_navigation(tmp_path: Path) -> None:
    snap, overrides = snapshot(tmp_path)

    text, data = call(snap, overrides, "repo_overview", repo="app")

    assert "languages by file count: Java 40% (2, navigation), " in text
    shares = {s["language"]: (s["files"], s["navigation"]) for s in data["language_shares"]}
    assert shares["Java"] == (2, True) and shares["Shell"] == (1, True)
    assert shares["Lua"] == (1, False) and shares["Markdown"] == (1, False)
    assert sum(s["share"] for s in data["language_shares"]) == pytest.approx(1.0)


def test_a_file_whose_parse_failed_its_bound_stays_listed_as_not_indexed_with_the_reason(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repos" / "app"
    make_repo(repo, {"src/Slow.java": "public class Slow {}\n", "src/Fast.java": "public class Fast {}\n"})
    settings = load_settings(env_file=None, data_dir=tmp_path / "data")
    store = BlobStore(settings.data_dir.resolve())
    db = store.connect()
    # what the blob pool records when a parse outlives blob_timeout_seconds (worker/repos/assemble.py)
    store.record_unparsed(
        db, git(repo, "rev-parse", "HEAD:src/Slow.java"), ["java"], "failed: took longer than 20 s"
    )
    db.close()

    snap = snapshot_repo(repo, "app", tmp_path / "snapshots" / "app", settings=settings)
    overrides: dict[str, object] = {"data_dir": tmp_path / "data"}

    overview, _ = call(snap, overrides, "repo_overview", repo="app")
    assert "1 file indexed; 1 not indexed (src/Slow.java: failed: took longer than 20 s)" in overview
    slow, _ = call(snap, overrides, "find_definition", symbol="Slow")
    assert "not indexed: src/Slow.java (failed: took longer than 20 s)" in slow
    assert "class Fast (Java), line 1" in call(snap, overrides, "find_definition", symbol="Fast")[0]
    assert "public class Slow" in call(snap, overrides, "read_file", repo="app", path="src/Slow.java")[0]
