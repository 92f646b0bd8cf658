"""search leaves out the tracked files a snapshot's own ignore files hide (.gitignore at any
depth, .ignore, .rgignore): the same files whether ripgrep reads the ignore files itself or the
search has learnt, once per snapshot, which files they hide and leaves those out by name."""

from __future__ import annotations

import time
from pathlib import Path

from config.settings import load_settings
from tests.support.fixture_repos import make_repo, snapshot_repo
from worker.repos.snapshot import Snapshot
from worker.tools import build_registry, make_context
from worker.tools.search_command import ripgrep_command
from worker.tools.search_scope import MAX_PATH_GLOBS, hidden_files_known, learn_in_background

NEEDLE = "needle\n"
FILES = {
    ".gitignore": "build/\n*.log\n",
    ".ignore": "vendor/\n",
    "sub/.rgignore": "local.txt\n",
    "build/gen [1].py": NEEDLE,  # tracked though ignored: committed with --force
    "debug.log": NEEDLE,
    "vendor/lib.py": NEEDLE,
    "sub/local.txt": NEEDLE,
    "sub/kept.txt": NEEDLE,
    "src/app.py": NEEDLE,
}


def built(tmp_path: Path, files: dict[str, str]) -> Snapshot:
    settings = load_settings(env_file=None, data_dir=tmp_path / "data")
    make_repo(tmp_path / "origin", files)
    root = tmp_path / "base" / "snapshots" / "app"
    return snapshot_repo(tmp_path / "origin", "app", root, settings=settings)


def searched(snapshot: Snapshot, glob: str | None = None) -> list[str]:
    ctx = make_context(load_settings(env_file=None), {"app": snapshot})
    outcome = build_registry().call(ctx, "search", {"pattern": "needle", "glob": glob})
    assert outcome.ok, outcome.text
    return sorted({m["path"] for m in outcome.data["matches"]})


def learnt(snapshot: Snapshot) -> list[str]:
    """The command line once the search has learnt what the snapshot's ignore files hide."""
    searched(snapshot)  # the first search starts the learning
    for _ in range(600):
        if hidden_files_known(snapshot.root):
            break
        time.sleep(0.05)
    return ripgrep_command(load_settings(env_file=None), "x", None, False, snapshot.root)


def test_tracked_files_the_ignore_files_hide_are_never_searched_before_or_after_learning(
    tmp_path: Path,
) -> None:
    snapshot = built(tmp_path, FILES)
    assert searched(snapshot) == ["src/app.py", "sub/kept.txt"]  # ripgrep reads the ignore files
    command = learnt(snapshot)
    assert "--no-ignore-vcs" in command and "--glob=!/build/gen \\[1\\].py" in command
    assert searched(snapshot) == ["src/app.py", "sub/kept.txt"]  # left out by name
    assert searched(snapshot, glob="build/**") == []  # the model's glob cannot bring one back
    assert searched(snapshot, glob="*.log") == []


def test_ignore_files_that_hide_no_tracked_file_cost_ripgrep_nothing(tmp_path: Path) -> None:
    snapshot = built(tmp_path, {".gitignore": "*.log\nbuild/\n", "src/app.py": NEEDLE, "README": NEEDLE})
    command = learnt(snapshot)
    assert "--no-ignore-vcs" in command and "--no-require-git" not in command
    assert not any(argument.startswith("--glob=!/") for argument in command)
    assert searched(snapshot) == ["README", "src/app.py"]


def test_more_hidden_files_than_are_worth_a_glob_each_keep_ripgrep_reading_the_ignore_files(
    tmp_path: Path,
) -> None:
    many = {f"build/{n}.py": NEEDLE for n in range(MAX_PATH_GLOBS + 1)}
    snapshot = built(tmp_path, {".gitignore": "build/\n", **many, "src/app.py": NEEDLE})
    command = learnt(snapshot)
    assert "--no-require-git" in command and "--no-ignore-vcs" not in command
    assert searched(snapshot) == ["src/app.py"]


def test_a_process_that_ends_with_its_question_never_starts_learning_and_still_leaves_them_out(
    tmp_path: Path,
) -> None:
    snapshot = built(tmp_path, FILES)
    learn_in_background(False)  # as a forked work horse does
    try:
        for _ in range(3):
            assert searched(snapshot) == ["src/app.py", "sub/kept.txt"]
        assert not hidden_files_known(snapshot.root)
        assert "--no-require-git" in ripgrep_command(
            load_settings(env_file=None), "x", None, False, snapshot.root
        )
    finally:
        learn_in_background(True)
