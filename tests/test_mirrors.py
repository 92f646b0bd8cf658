"""Mirrors and snapshots against real git: clone, refresh, leases, GC, failures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.git_remote import (
    GitRemote,
    git,
    make_mirrors,
    mirrors_for,
    mirrors_of,
    silent_server,
    snapshot_entries,
)
from worker.repos.mirrors import UnknownRepoError


def test_first_sync_clones_and_current_is_the_pushed_commit_with_its_files_and_no_git(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    mirrors = mirrors_for(tmp_path, remote)

    result = mirrors.sync("app")

    assert (result.ok, result.sha, result.changed, result.error) == (True, remote.sha(), True, None)
    snapshot = mirrors.current("app")
    assert snapshot is not None and snapshot.sha == remote.sha() and snapshot.branch == "main"
    assert (snapshot.root / "src" / "app.py").read_text() == "print('v1')\n"
    assert not (snapshot.root / ".git").exists()
    assert snapshot.meta.file_count == 2 and "Python" in snapshot.meta.languages
    assert snapshot.committed_at == int(git("log", "-1", "--format=%ct", cwd=remote.work))


def test_a_new_commit_switches_current_and_the_unused_old_snapshot_is_removed(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    mirrors = mirrors_for(tmp_path, remote)
    first = mirrors.sync("app").sha
    second = remote.commit({"src/app.py": "print('v2')\n"})

    result = mirrors.sync("app")

    assert result.ok and result.changed and result.sha == second != first
    snapshot = mirrors.current("app")
    assert snapshot is not None and (snapshot.root / "src/app.py").read_text() == "print('v2')\n"
    assert snapshot_entries(mirrors) == [second, f"{second}.blobs", f"{second}.json", f"{second}.lock"]


def test_syncing_again_with_nothing_new_changes_nothing(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    mirrors = mirrors_for(tmp_path, remote)
    mirrors.sync("app")
    before = mirrors.current("app")

    again = mirrors.sync("app")

    assert again.ok and not again.changed and again.sha == remote.sha()
    assert mirrors.current("app") == before  # the same snapshot, not a rebuilt one


def test_a_question_keeps_reading_its_commit_when_a_new_commit_arrives_mid_question(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    mirrors = mirrors_for(tmp_path, remote)
    old_sha = mirrors.sync("app").sha
    with mirrors.lease(["app"]) as snapshots:
        held = snapshots["app"]
        new_sha = remote.commit({"src/app.py": "print('v2')\n", "src/new.py": "x = 1\n"})
        assert mirrors.sync("app").sha == new_sha  # the refresh goes through meanwhile...
        assert held.sha == old_sha  # ...but the question still reads its own commit
        assert (held.root / "src/app.py").read_text() == "print('v1')\n"
        assert not (held.root / "src/new.py").exists()
        assert mirrors.gc("app") == []  # leased: not removed
    assert mirrors.gc("app") == [old_sha]  # released: removed
    assert not held.root.exists()
    current = mirrors.current("app")
    assert current is not None and current.sha == new_sha


def test_a_force_push_is_followed(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    remote.commit({"src/app.py": "print('v2')\n"})
    mirrors = mirrors_for(tmp_path, remote)
    mirrors.sync("app")

    rewritten = remote.force_push_replacing_last_commit({"src/app.py": "print('rewritten')\n"})
    result = mirrors.sync("app")

    assert result.ok and result.changed and result.sha == rewritten
    snapshot = mirrors.current("app")
    assert snapshot is not None and (snapshot.root / "src/app.py").read_text() == "print('rewritten')\n"


def test_a_deleted_branch_keeps_serving_the_last_good_snapshot_and_says_why(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    good = remote.commit({"notes.md": "on a branch\n"}, branch="feature")
    mirrors = make_mirrors(tmp_path, [{"name": "app", "url": str(remote.bare), "branch": "feature"}])
    assert mirrors.sync("app").sha == good
    remote.delete_branch("feature")

    result = mirrors.sync("app")

    assert not result.ok and result.sha == good and not result.changed
    assert result.error is not None and "branch 'feature' not found" in result.error
    current = mirrors.current("app")
    assert current is not None and current.sha == good and (current.root / "notes.md").exists()
    (status,) = mirrors.status()
    assert status.sha == good and status.last_error == result.error


def test_an_unreachable_remote_keeps_the_last_snapshot_and_status_shows_the_error(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    mirrors = mirrors_for(tmp_path, remote)
    good = mirrors.sync("app").sha
    shutil.move(remote.bare, tmp_path / "moved.git")

    result = mirrors.sync("app")

    assert not result.ok and result.sha == good
    assert result.error is not None and result.error.startswith("fetch failed:")
    assert "does not appear to be a git repository" in result.error
    with mirrors.lease(["app"]) as snapshots:
        assert snapshots["app"].sha == good
    (status,) = mirrors.status()
    assert status.last_error == result.error and status.last_attempt_at is not None


def test_a_remote_that_never_answers_fails_after_the_git_timeout_and_keeps_serving(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    mirrors = mirrors_for(tmp_path, remote, git_timeout_seconds=1.0)
    good = mirrors.sync("app").sha
    with silent_server() as url:
        entry = {"name": "app", "url": url, "branch": "main"}  # the same repo, its remote now hung
        hung = make_mirrors(tmp_path, [entry], git_timeout_seconds=1.0)
        result = hung.sync("app")  # without the 1 s git timeout: hung until the test's timeout

    assert not result.ok and result.sha == good
    assert result.error == "fetch failed: git fetch timed out after 1 s"


def test_a_successful_sync_after_a_failure_clears_the_error(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    mirrors = mirrors_for(tmp_path, remote)
    shutil.move(remote.bare, tmp_path / "moved.git")
    failed = mirrors.sync("app")
    assert not failed.ok and failed.sha is None  # nothing to serve yet
    assert mirrors.status()[0].last_error == failed.error
    shutil.move(tmp_path / "moved.git", remote.bare)

    assert mirrors.sync("app").ok
    assert mirrors.status()[0].last_error is None


def test_the_default_branch_is_discovered_when_no_branch_is_configured(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin", branch="trunk")
    mirrors = make_mirrors(tmp_path, [{"name": "app", "url": str(remote.bare)}])

    assert mirrors.sync("app").sha == remote.sha("trunk")
    current = mirrors.current("app")
    assert current is not None and current.branch == "trunk"

    release = remote.commit({"RELEASE": "2.0\n"}, branch="release")
    remote.set_default_branch("release")
    assert mirrors.sync("app").sha == release
    assert mirrors.status()[0].branch == "release"


def test_files_marked_export_ignore_are_still_in_the_snapshot(tmp_path: Path) -> None:
    # git archive honours .gitattributes; citations need every file of the commit.
    remote = GitRemote.create(tmp_path / "origin")
    attributes = "tests/ export-ignore\nVERSION export-subst\n"
    remote.commit({".gitattributes": attributes, "VERSION": "$Format:%H$\n", "tests/test_a.py": "x = 1\n"})
    mirrors = mirrors_for(tmp_path, remote)
    mirrors.sync("app")

    snapshot = mirrors.current("app")
    assert snapshot is not None
    assert (snapshot.root / "tests/test_a.py").is_file()
    assert (snapshot.root / "VERSION").read_text() == "$Format:%H$\n"


def test_progress_is_reported_in_phases_and_ends_complete(tmp_path: Path) -> None:
    # Over 100 objects, so git receives a pack (and reports it) rather than unpacking.
    remote = GitRemote.create(tmp_path / "origin", files={f"f{i}.txt": f"{i}\n" for i in range(150)})
    mirrors = mirrors_for(tmp_path, remote)
    seen: list[tuple[str, float | None]] = []

    mirrors.sync("app", progress=lambda message, fraction: seen.append((message, fraction)))

    messages = [message for message, _ in seen]
    assert "connecting" in messages and "receiving objects" in messages and "making snapshot" in messages
    fractions = [fraction for _, fraction in seen if fraction is not None]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


def test_repos_never_synced_are_simply_absent_from_a_lease(tmp_path: Path) -> None:
    one, two = GitRemote.create(tmp_path / "one"), GitRemote.create(tmp_path / "two")
    mirrors = mirrors_of(tmp_path, {"one": one, "two": two})
    mirrors.sync("one")

    with mirrors.lease(["one", "two"]) as snapshots:
        assert list(snapshots) == ["one"]
    with pytest.raises(UnknownRepoError, match="known repos: one, two"):
        mirrors.sync("three")


def test_gc_clears_what_a_dead_sync_left_half_done(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    mirrors = mirrors_for(tmp_path, remote)
    sha = mirrors.sync("app").sha
    snapshots = tmp_path / "data/repos/app/snapshots"
    (snapshots / f".tmp-{'0' * 40}-999999/src").mkdir(parents=True)
    (snapshots / f"{'1' * 40}.json").write_text(json.dumps({"sha": "1" * 40}))

    assert mirrors.gc("app") == ["1" * 40]
    assert snapshot_entries(mirrors) == [sha, f"{sha}.blobs", f"{sha}.json", f"{sha}.lock"]
