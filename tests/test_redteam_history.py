"""Red team, reachable history only: a force-pushed commit is gone by any name, and which machine
synced when never decides what is secret (a shallow edge seen from two data dirs).

Real git remotes (tests/support/git_remote.py), the real Mirrors, the real tools."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.git_remote import GitRemote, make_mirrors
from worker.repos.mirrors import Mirrors
from worker.tools import build_registry, make_context

REGISTRY = build_registry()


def answers(mirrors: Mirrors, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    with mirrors.lease(["app"]) as snapshots:
        ctx = make_context(mirrors.settings, snapshots)
        outcomes = [REGISTRY.call(ctx, name, {"repo": "app", **arguments}) for name, arguments in calls]
    return [("ok " if o.ok else "error ") + o.text + json.dumps(o.data, sort_keys=True) for o in outcomes]


@pytest.mark.parametrize("depth", [None, 2], ids=["whole mirror", "windowed mirror with lineage.git"])
def test_a_force_pushed_commit_cannot_be_read_by_its_sha_or_any_prefix(
    tmp_path: Path, depth: int | None
) -> None:
    remote = GitRemote.create(tmp_path / "remote")
    remote.commit({"src/more.py": "X = 1\n"}, "Add more")  # three commits: more than a window of 2
    marker = "leakmarker" + "Zq4" * 6  # no rule detects it: only reachability keeps it out
    leaked = remote.commit({"notes.txt": f"token {marker}\n"}, "Add notes")
    entry = {"name": "app", "url": str(remote.bare), "branch": "main"}
    mirrors = make_mirrors(tmp_path / "m", [{**entry, "history_depth": depth} if depth else entry])
    assert mirrors.sync("app").ok
    remote.force_push_replacing_last_commit({"notes.txt": "nothing here\n"})
    assert mirrors.sync("app").ok
    never = "0123456789abcdef0123456789abcdef01234567"

    refs = (leaked, leaked[:4], leaked[:7], never[:7])
    shown = answers(mirrors, [("show", {"sha": ref}) for ref in refs])
    ranged = answers(mirrors, [("diff", {"from": leaked}), ("log", {"since": leaked[:8]})])

    assert not any(marker in text for text in shown + ranged)
    assert shown[0].startswith("error ") and "is not in the history of app" in shown[0]
    assert "at least 7 hex digits" in shown[1]
    assert shown[2].replace(leaked[:7], "X") == shown[3].replace(never[:7], "X")  # as if it never was
    kept = sorted(path.name for path in (tmp_path / "m").rglob("*.git"))  # lineage.git: the names
    assert kept == (["lineage.git", "mirror.git"] if depth else ["mirror.git"])
    for git_dir in (tmp_path / "m").rglob("*.git"):
        assert subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "-e", leaked]).returncode != 0


def test_two_data_dirs_at_the_same_commit_give_identical_answers_at_a_shallow_edge(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "remote")
    marker = "envmarker" + "Kp7" * 6
    remote.commit({".env": f"FAVORITE={marker}\n"}, "Add settings")
    subprocess.run(["git", "mv", ".env", "config.defaults"], cwd=remote.work, check=True)
    remote.commit({}, "Keep the defaults")  # the rename: the blob is unchanged
    entry = [{"name": "app", "url": str(remote.bare), "branch": "main", "history_depth": 2}]
    early = make_mirrors(tmp_path / "early", entry)
    assert early.sync("app").ok  # saw .env inside its window
    for number in range(3):  # the rename falls behind the edge of a 2-commit window
        remote.commit({f"src/m{number}.py": f"X = {number}\n"}, f"Add module {number}")
    assert early.sync("app").ok
    fresh = make_mirrors(tmp_path / "fresh", entry)
    assert fresh.sync("app").ok
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"path": "config.defaults"}), ("search", {"pattern": "FAVORITE"}), ("log", {}),
        ("log", {"query": "FAVORITE"}), ("show", {"sha": "HEAD~1"}), ("diff", {"from": "HEAD~1"}),
        ("list_files", {"path": ""}), ("repo_overview", {}),
    ]  # fmt: skip

    seen = answers(early, calls), answers(fresh, calls)

    assert seen[0] == seen[1]
    assert not any(marker in text for text in seen[0])
    assert "withheld: a secret file (by its name) in another commit" in seen[0][0]


def test_a_mirror_of_the_whole_history_synced_commit_by_commit_knows_what_a_fresh_one_knows(
    tmp_path: Path,
) -> None:
    remote = GitRemote.create(tmp_path / "remote")
    marker = "origmarker" + "Wd3" * 6
    remote.commit({"notes.txt": f"{marker}\n"}, "Add notes")
    remote.commit({"notes.txt": f"{marker}\nand more\n"}, "Edit notes")  # descends from the first
    entry = [{"name": "app", "url": str(remote.bare), "branch": "main", "history_depth": "all"}]
    stepwise = make_mirrors(tmp_path / "stepwise", entry)
    assert stepwise.sync("app").ok
    remote.commit({".env": f"{marker}\n"}, "Keep the first notes as settings")  # names the first blob secret
    assert stepwise.sync("app").ok  # reads only the new commit, yet knows the edit came from it
    fresh = make_mirrors(tmp_path / "fresh", entry)
    assert fresh.sync("app").ok
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"path": "notes.txt"}), ("show", {"sha": "HEAD~1"}), ("log", {"query": "more"}),
    ]  # fmt: skip

    seen = answers(stepwise, calls), answers(fresh, calls)

    assert seen[0] == seen[1]
    assert "withheld: it descends from a secret file" in seen[0][0]
    assert not any(marker in text for text in seen[0])


def test_a_sync_whose_lineage_scan_fails_keeps_the_last_snapshot_and_shows_no_history_content(
    tmp_path: Path,
) -> None:
    remote = GitRemote.create(tmp_path / "remote")
    for number in range(5):  # more history than the window: the names before it come from lineage.git
        remote.commit({f"src/m{number}.py": f"X = {number}\n"}, f"Add module {number}")
    entry = [{"name": "app", "url": str(remote.bare), "branch": "main", "history_depth": 5}]
    mirrors = make_mirrors(tmp_path / "m", entry)
    good = mirrors.sync("app").sha
    marker = "envmarker" + "Tn5" * 6
    remote.commit({".env": f"FAVORITE={marker}\n"}, "Add settings")
    subprocess.run(["git", "mv", ".env", "notes.txt"], cwd=remote.work, check=True)
    remote.commit({}, "Keep the settings as notes")
    side = next((tmp_path / "m").rglob("lineage.git"))
    (side / "config").write_text("[broken\n")  # the blobless copy cannot be fetched: the scan fails
    result = mirrors.sync("app")
    shown = answers(mirrors, [("show", {"sha": "HEAD"}), ("read_file", {"path": "README.md"})])

    assert not result.ok and result.sha == good
    assert result.error is not None and "listing the secret files in the history failed" in result.error
    assert not any(marker in text for text in shown) and shown[1].startswith("ok ")
    assert not (next((tmp_path / "m").rglob("mirror.git")) / "codebot-secret-blobs").exists()
