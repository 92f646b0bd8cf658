"""History in the mirrors: `history_depth` per repo and by default, a global cap, and refreshes
that deepen or trim the history incrementally while the snapshot stays the tip's."""

from __future__ import annotations

from pathlib import Path

from tests.support.git_remote import GitRemote, git, make_mirrors
from worker.repos.cleanup import BackgroundCleaner
from worker.repos.mirrors import Mirrors


def remote_with(root: Path, commits: int) -> GitRemote:
    remote = GitRemote.create(root / "origin")
    for number in range(commits - 1):
        remote.commit({"src/app.py": f"print({number})\n", f"notes/{number}.txt": "x\n" * 2000})
    return remote


def mirrors(root: Path, remote: GitRemote, depth: object = None, **settings: object) -> Mirrors:
    entry = {"name": "app", "url": str(remote.bare), "branch": "main"}
    if depth is not None:
        entry["history_depth"] = depth
    return make_mirrors(root, [entry], **settings)


def commits_in(root: Path) -> int:
    return int(git("--git-dir", str(root / "data/repos/app/mirror.git"), "rev-list", "--count", "main"))


def objects_in(root: Path) -> int:
    """Loose and packed objects of the mirror."""
    counts = dict(
        line.split(": ")
        for line in git(
            "--git-dir", str(root / "data/repos/app/mirror.git"), "count-objects", "-v"
        ).splitlines()
    )
    return int(counts["count"]) + int(counts["in-pack"])


def test_a_mirror_keeps_history_depth_commits_and_the_snapshot_is_the_tip(tmp_path: Path) -> None:
    remote = remote_with(tmp_path, 6)

    result = mirrors(tmp_path, remote, history_depth=4).sync("app")

    assert result.ok and result.sha == remote.sha()
    assert commits_in(tmp_path) == 4
    snapshot = mirrors(tmp_path, remote).current("app")
    assert snapshot is not None and snapshot.git_dir == tmp_path / "data/repos/app/mirror.git"
    assert (snapshot.root / "src/app.py").read_text() == "print(4)\n"


def test_the_default_depth_covers_a_young_repo_whole(tmp_path: Path) -> None:
    remote = remote_with(tmp_path, 5)

    mirrors(tmp_path, remote).sync("app")

    assert commits_in(tmp_path) == 5


def test_a_repo_entry_overrides_the_default_and_all_is_capped_by_history_max_depth(tmp_path: Path) -> None:
    remote = remote_with(tmp_path, 6)
    cases = [
        ("two", 2, {"history_depth": 5}),
        ("all", "all", {}),
        ("capped", "all", {"history_max_depth": 3}),
    ]

    for folder, depth, settings in cases:
        assert mirrors(tmp_path / folder, remote, depth, **settings).sync("app").ok

    assert [commits_in(tmp_path / folder) for folder, _, _ in cases] == [2, 6, 3]


def test_a_refresh_deepens_the_history_when_history_depth_grows(tmp_path: Path) -> None:
    remote = remote_with(tmp_path, 6)
    mirrors(tmp_path, remote, 2).sync("app")

    again = mirrors(tmp_path, remote, 5).sync("app")

    assert again.ok and not again.changed  # the same tip: the snapshot is not rebuilt
    assert commits_in(tmp_path) == 5


def test_a_refresh_trims_the_history_and_frees_its_space_when_history_depth_shrinks(tmp_path: Path) -> None:
    remote = remote_with(tmp_path, 8)
    mirrors(tmp_path, remote, "all").sync("app")
    before = objects_in(tmp_path)

    result = mirrors(tmp_path, remote, 1).sync("app")

    assert result.ok and commits_in(tmp_path) == 1
    assert objects_in(tmp_path) < before / 2  # the commits, trees and notes of the older commits are gone
    assert result.sha == remote.sha()


def test_a_new_commit_moves_the_window_and_tags_inside_it_come_along(tmp_path: Path) -> None:
    remote = remote_with(tmp_path, 5)
    git("tag", "v-old", "HEAD~4", cwd=remote.work)
    git("tag", "-a", "-m", "release", "v-new", "HEAD~1", cwd=remote.work)
    git("push", "--quiet", "origin", "--tags", cwd=remote.work)
    sync = mirrors(tmp_path, remote, 3)
    sync.sync("app")
    tip = remote.commit({"src/app.py": "print('new')\n"})

    result = sync.sync("app")

    git_dir = str(tmp_path / "data/repos/app/mirror.git")
    assert result.ok and result.sha == tip and commits_in(tmp_path) == 3
    assert git("--git-dir", git_dir, "tag").split() == ["v-new"]  # v-old is older than the window


def test_a_repo_with_a_mailmap_and_more_history_than_the_window_syncs(tmp_path: Path) -> None:
    # The history before the window is read from a copy without file contents, where git would
    # otherwise go and fetch the .mailmap (rq/rq: every sync failed)
    remote = GitRemote.create(tmp_path / "origin", branch="master")  # what that copy's HEAD names
    for number in range(5):
        remote.commit({".mailmap": f"Real Name <real@example.com> <old{number}@example.com>\n"})
    entry = {"name": "app", "url": str(remote.bare), "branch": "master"}

    result = make_mirrors(tmp_path, [entry], history_depth=2).sync("app")

    assert result.ok, result.error
    snapshot = make_mirrors(tmp_path, [entry]).current("app")
    assert snapshot is not None and (snapshot.root / ".mailmap").read_text().startswith("Real Name")


def packs_of(root: Path) -> list[Path]:
    return sorted((root / "data/repos/app/mirror.git/objects/pack").glob("*.pack"))


def test_a_windowed_mirror_is_repacked_once_in_the_background_after_its_first_sync(tmp_path: Path) -> None:
    remote = remote_with(tmp_path, 6)
    background = mirrors(tmp_path, remote, history_depth=3)
    background.cleaner = cleaner = BackgroundCleaner()  # as a worker runs it

    assert background.sync("app").ok
    cleaner.wait()
    (repacked,) = packs_of(tmp_path)  # the fetch's pack, deltas recomputed into one
    assert (tmp_path / "data/repos/app/mirror.git/codebot-window-repacked").exists()
    remote.commit({"src/app.py": "print('new')\n"})
    assert background.sync("app").ok
    cleaner.wait()

    assert packs_of(tmp_path) == [repacked]  # not repacked again: the new commit's few objects stay loose
    assert commits_in(tmp_path) == 3
    snapshot = background.current("app")
    assert snapshot is not None and (snapshot.root / "src/app.py").read_text() == "print('new')\n"


def test_a_mirror_with_its_whole_history_is_left_as_fetched(tmp_path: Path) -> None:
    remote = remote_with(tmp_path, 3)
    whole = mirrors(tmp_path, remote, history_depth=10)

    assert whole.sync("app").ok

    assert not (tmp_path / "data/repos/app/mirror.git/shallow").exists()
    assert not (tmp_path / "data/repos/app/mirror.git/codebot-window-repacked").exists()
