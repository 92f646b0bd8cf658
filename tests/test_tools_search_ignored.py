"""search leaves out the tracked files a snapshot's own ignore files hide (.gitignore at any
depth, .ignore, .rgignore): listed once when the snapshot is built and left out by name from
its first search on, or read by ripgrep itself for a snapshot built before that list existed;
the same files either way, and a refresh that changes an ignore file changes them."""

from __future__ import annotations

import json
import os
from pathlib import Path

from config.settings import load_settings
from tests.support.fixture_repos import make_repo, snapshot_repo
from tests.support.git_remote import GitRemote, mirrors_for
from worker.repos.manifest import load_manifest, manifest_path
from worker.repos.snapshot import Snapshot
from worker.tools import build_registry, make_context
from worker.tools.search_command import ripgrep_command
from worker.tools.search_scope import MAX_PATH_GLOBS

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


def command(snapshot: Snapshot) -> list[str]:
    return ripgrep_command(load_settings(env_file=None), "x", None, False, snapshot.root)


def test_the_first_search_of_a_new_snapshot_leaves_out_by_name_what_its_ignore_files_hide(
    tmp_path: Path,
) -> None:
    snapshot = built(tmp_path, FILES)
    manifest = load_manifest(snapshot.root)
    assert manifest is not None
    assert manifest.ignored == ("build/gen [1].py", "debug.log", "sub/local.txt", "vendor/lib.py")
    assert "--no-ignore-vcs" in command(snapshot) and "--glob=!/build/gen \\[1\\].py" in command(snapshot)
    assert searched(snapshot) == ["src/app.py", "sub/kept.txt"]
    assert searched(snapshot, glob="build/**") == []  # the model's glob cannot bring one back
    assert searched(snapshot, glob="*.log") == []
    assert searched(snapshot, glob="sub/*") == ["sub/kept.txt"]


def test_a_snapshot_built_before_the_list_existed_still_hides_them_through_ripgrep(tmp_path: Path) -> None:
    snapshot = built(tmp_path, FILES)
    path = manifest_path(snapshot.root)
    record = json.loads(path.read_text())
    del record["ignored"]  # as builds before it wrote the manifest
    path.write_text(json.dumps(record))
    stamp = path.stat().st_mtime_ns + 10**9  # another stamp, however fast the rewrite
    os.utime(path, ns=(stamp, stamp))
    assert "--no-require-git" in command(snapshot) and "--no-ignore-vcs" not in command(snapshot)
    assert searched(snapshot) == ["src/app.py", "sub/kept.txt"]
    assert searched(snapshot, glob="build/**") == []


def test_ignore_files_that_hide_no_tracked_file_cost_ripgrep_nothing(tmp_path: Path) -> None:
    snapshot = built(tmp_path, {".gitignore": "*.log\nbuild/\n", "src/app.py": NEEDLE, "README": NEEDLE})
    assert "--no-ignore-vcs" in command(snapshot) and "--no-require-git" not in command(snapshot)
    assert not any(argument.startswith("--glob=!/") for argument in command(snapshot))
    assert searched(snapshot) == ["README", "src/app.py"]


def test_more_hidden_files_than_are_worth_a_glob_each_keep_ripgrep_reading_the_ignore_files(
    tmp_path: Path,
) -> None:
    many = {f"build/{n}.py": NEEDLE for n in range(MAX_PATH_GLOBS + 1)}
    snapshot = built(tmp_path, {".gitignore": "build/\n", **many, "src/app.py": NEEDLE})
    assert "--no-require-git" in command(snapshot) and "--no-ignore-vcs" not in command(snapshot)
    assert searched(snapshot) == ["src/app.py"]


def test_a_refresh_that_changes_a_gitignore_changes_what_search_leaves_out(tmp_path: Path) -> None:
    files = {".gitignore": "*.log\n", "debug.log": NEEDLE, "notes.txt": NEEDLE, "src/app.py": NEEDLE}
    remote = GitRemote.create(tmp_path / "origin", files=files)  # debug.log committed with --force
    mirrors = mirrors_for(tmp_path / "host", remote)

    def served() -> list[str]:
        assert mirrors.sync("app").ok
        snapshot = mirrors.current("app")
        assert snapshot is not None
        assert "--no-ignore-vcs" in command(snapshot)  # left out by name, from the first search on
        return searched(snapshot)

    assert served() == ["notes.txt", "src/app.py"]
    remote.commit({".gitignore": "*.txt\n"})
    assert served() == ["debug.log", "src/app.py"]
    remote.commit({"src/app.py": NEEDLE + NEEDLE})  # no ignore file touched: the lists are reused
    assert served() == ["debug.log", "src/app.py"]
    remote.commit({"src/.ignore": "app.py\n"})  # a new ignore file, in a folder
    assert served() == ["debug.log"]
