"""search leaves out files larger than `search_max_file_bytes` (their size in git), by name from
the snapshot's manifest when it can, else through ripgrep's own size check: the same files
either way, and a glob of the model's cannot bring one back."""

from __future__ import annotations

from pathlib import Path

from config.settings import load_settings
from tests.support.fixture_repos import make_repo, snapshot_repo
from worker.repos.manifest import manifest_path
from worker.repos.snapshot import Snapshot
from worker.tools import build_registry, make_context
from worker.tools.search_scope import MAX_PATH_GLOBS as MAX_LARGE_FILE_GLOBS

LIMIT = 1000


def needle(size: int) -> str:
    return "needle\n" + "x" * (size - len("needle\n"))


def built(tmp_path: Path, files: dict[str, str]) -> Snapshot:
    settings = load_settings(env_file=None, data_dir=tmp_path / "data", search_max_file_bytes=LIMIT)
    make_repo(tmp_path / "origin", files)
    return snapshot_repo(
        tmp_path / "origin", "app", tmp_path / "base" / "snapshots" / "app", settings=settings
    )


def searched(snapshot: Snapshot, glob: str | None = None) -> list[str]:
    settings = load_settings(env_file=None, search_max_file_bytes=LIMIT)
    ctx = make_context(settings, {"app": snapshot})
    outcome = build_registry().call(ctx, "search", {"pattern": "needle", "glob": glob})
    assert outcome.ok, outcome.text
    return sorted({m["path"] for m in outcome.data["matches"]})


def test_a_file_over_the_size_limit_is_not_searched_and_one_at_the_limit_is(tmp_path: Path) -> None:
    snapshot = built(
        tmp_path,
        {
            "big.txt": needle(LIMIT + 1),
            "BIG.txt": needle(10),  # same name in another case: a file of its own
            "at_limit.txt": needle(LIMIT),
            "deep/odd [name]{a,b}*?!#.txt": needle(LIMIT * 3),  # glob characters, taken literally
            "deep/odd x.txt": needle(10),
        },
    )
    assert manifest_path(snapshot.root).exists()
    assert searched(snapshot) == ["BIG.txt", "at_limit.txt", "deep/odd x.txt"]
    assert searched(snapshot, glob="big.txt") == []  # the model's glob cannot bring it back
    assert searched(snapshot, glob="deep/**") == ["deep/odd x.txt"]


def test_a_snapshot_without_a_manifest_leaves_out_the_same_large_files(tmp_path: Path) -> None:
    snapshot = built(tmp_path, {"big.txt": needle(LIMIT + 1), "small.txt": needle(10)})
    manifest_path(snapshot.root).unlink()  # as a snapshot built before manifests existed
    assert searched(snapshot) == ["small.txt"]


def test_more_large_files_than_are_worth_a_glob_each_are_all_left_out(tmp_path: Path) -> None:
    files = {f"big/{n}.txt": needle(LIMIT + 1) for n in range(MAX_LARGE_FILE_GLOBS + 1)}
    snapshot = built(tmp_path, {**files, "small.txt": needle(10), "big/tiny.txt": needle(10)})
    assert searched(snapshot) == ["big/tiny.txt", "small.txt"]
