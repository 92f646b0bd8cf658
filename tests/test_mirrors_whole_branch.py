"""A mirror whose `history_depth` window reaches the branch's first commit holds the whole branch:
it keeps no blobless copy (`lineage.git`) beside it, which would repeat its commits and trees,
and decides lineage from itself. The verdicts, the history tools and the transitions (a branch
growing past its window, a deeper window, a mirror from before) answer as a fresh data dir does.

Real git remotes (tests/support/git_remote.py), the real Mirrors, the real tools."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.support.git_remote import GitRemote, git, make_mirrors
from tests.test_redteam_history import answers
from worker.repos.mirrors import Mirrors

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": "config.defaults"}), ("log", {}), ("show", {"sha": "HEAD"}),
    ("diff", {"from": "HEAD~1"}), ("search", {"pattern": "FAVORITE"}),
]  # fmt: skip
MARKER = "envmarker" + "Qv8" * 6


def renamed_secret(root: Path) -> GitRemote:
    """Three commits: a dotenv file, then the same blob renamed to a name no rule knows."""
    remote = GitRemote.create(root / "remote")
    remote.commit({".env": f"FAVORITE={MARKER}\n"}, "Add settings")
    subprocess.run(["git", "mv", ".env", "config.defaults"], cwd=remote.work, check=True)
    remote.commit({}, "Keep the defaults")
    return remote


def mirror_of(root: Path, remote: GitRemote, depth: int) -> Mirrors:
    return make_mirrors(
        root, [{"name": "app", "url": str(remote.bare), "branch": "main", "history_depth": depth}]
    )


def kept(root: Path) -> list[str]:
    return sorted(path.name for path in (root / "data/repos/app").glob("*.git"))


def test_a_window_that_reaches_the_first_commit_keeps_no_blobless_copy_and_still_withholds_a_renamed_secret(
    tmp_path: Path,
) -> None:
    remote = renamed_secret(tmp_path)
    mirrors = mirror_of(tmp_path / "m", remote, 10)

    assert mirrors.sync("app").ok

    assert kept(tmp_path / "m") == ["mirror.git"]
    seen = answers(mirrors, CALLS)
    assert "withheld: a secret file (by its name) in another commit" in seen[0]
    assert not any(MARKER in text for text in seen)
    assert seen[1].startswith("ok ") and "history_depth" not in seen[1]  # no edge note: it reaches the root


def test_a_branch_that_grows_past_its_window_gets_a_blobless_copy_and_answers_as_a_fresh_sync(
    tmp_path: Path,
) -> None:
    remote = renamed_secret(tmp_path)
    grown = mirror_of(tmp_path / "grown", remote, 4)
    assert grown.sync("app").ok and kept(tmp_path / "grown") == ["mirror.git"]
    for number in range(3):  # the rename falls behind the edge of a 4-commit window
        remote.commit({f"src/m{number}.py": f"X = {number}\n"}, f"Add module {number}")

    assert grown.sync("app").ok
    fresh = mirror_of(tmp_path / "fresh", remote, 4)
    assert fresh.sync("app").ok

    assert kept(tmp_path / "grown") == kept(tmp_path / "fresh") == ["lineage.git", "mirror.git"]
    seen = answers(grown, CALLS)
    assert seen == answers(fresh, CALLS)
    assert "withheld: a secret file (by its name) in another commit" in seen[0]
    assert not any(MARKER in text for text in seen)


def test_a_window_deepened_to_the_whole_branch_drops_its_blobless_copy_and_its_window_records(
    tmp_path: Path,
) -> None:
    remote = renamed_secret(tmp_path)
    for number in range(3):
        remote.commit({f"src/m{number}.py": f"X = {number}\n"}, f"Add module {number}")
    assert mirror_of(tmp_path / "m", remote, 2).sync("app").ok  # as a mirror from before kept it
    assert kept(tmp_path / "m") == ["lineage.git", "mirror.git"]

    deepened = mirror_of(tmp_path / "m", remote, 50)
    assert deepened.sync("app").ok
    fresh = mirror_of(tmp_path / "fresh", remote, 50)
    assert fresh.sync("app").ok

    mirror = tmp_path / "m/data/repos/app/mirror.git"
    assert kept(tmp_path / "m") == ["mirror.git"] and not (mirror / "shallow").exists()
    assert not (mirror / "codebot-lineage-window").exists()  # the windowed scan's records, now unused
    seen = answers(deepened, CALLS)
    assert seen == answers(fresh, CALLS)
    assert "withheld: a secret file (by its name) in another commit" in seen[0]


def test_a_mirror_keeps_its_tags_in_one_file_and_the_history_tools_still_name_them(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "remote")
    for number in range(3):
        remote.commit({"src/app.py": f"print({number})\n"}, f"Release {number}")
        git("tag", f"v{number}", cwd=remote.work)
    git("push", "--quiet", "origin", "--tags", cwd=remote.work)
    mirrors = mirror_of(tmp_path / "m", remote, 10)

    assert mirrors.sync("app").ok

    mirror = tmp_path / "m/data/repos/app/mirror.git"
    assert list((mirror / "refs/tags").iterdir()) == []  # no 4 kB block per tag
    assert git("--git-dir", str(mirror), "tag").split() == ["v0", "v1", "v2"]
    shown = answers(mirrors, [("diff", {"from": "v1", "to": "v2"})])[0]
    assert shown.startswith("ok ") and "print(2)" in shown
