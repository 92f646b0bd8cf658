"""A refresh builds what changed, and serves byte for byte what a full build of the same commit
serves: the files, links and placeholders, the manifest (with its redacted names), the symbol
index, the metadata and the search index; whatever the push did (a rename, a deletion, a file
turned secret, a link moved, a token in a new file name, history rewritten)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.support.git_remote import GitRemote, git, mirrors_for
from tests.test_refresh_reuse import FILES, served
from worker.repos.mirrors import Mirrors
from worker.repos.search_index import build as search_build
from worker.repos.search_index.store import index_file, snapshot_key
from worker.repos.symbols import index_path

TOKEN_NAME = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub token's shape, built at run time


def everything_served(mirrors: Mirrors) -> dict[str, object]:
    """What `served` compares, plus the names shown redacted and the search index's rows."""
    snapshot = mirrors.current("app")
    assert snapshot is not None
    manifest = json.loads(index_path(snapshot.root).with_suffix(".paths").read_text())
    with sqlite3.connect(index_file(mirrors.settings)) as db:
        rows = db.execute(
            "SELECT f.path, b.digest, f.size FROM files f JOIN snapshots s ON s.id = f.snapshot "
            "LEFT JOIN blobs b ON b.id = f.blob WHERE s.key = ? AND s.done = 1",
            (snapshot_key(snapshot.root),),
        )
        search = sorted(rows)
    assert search, "the snapshot was indexed for search"
    return {**served(mirrors), "redacted": manifest.get("redacted"), "search": search}


def full_build(tmp_path: Path, remote: GitRemote, label: str) -> dict[str, object]:
    mirrors = mirrors_for(tmp_path / f"full-{label}", remote)
    assert mirrors.sync("app").ok
    return everything_served(mirrors)


def test_a_refresh_reads_for_the_search_index_only_the_files_the_push_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {f"pkg{d}/m{i}.py": f"X{i} = {d}\n" for d in range(4) for i in range(15)}
    remote = GitRemote.create(tmp_path / "origin", files=files)
    mirrors = mirrors_for(tmp_path / "host", remote)
    assert mirrors.sync("app").ok
    looked_at: list[str] = []
    index_one = search_build._index_file
    monkeypatch.setattr(
        search_build, "_index_file", lambda db, sid, root, path, known: looked_at.append(path) or index_one(db, sid, root, path, known)
    )  # fmt: skip

    remote.commit({"pkg1/m3.py": "X3 = 'changed'\n", "pkg3/new.py": "Y = 1\n"})
    assert mirrors.sync("app").ok

    assert sorted(looked_at) == ["pkg1/m3.py", "pkg3/new.py"]  # the 59 others: rows copied
    monkeypatch.undo()
    assert everything_served(mirrors) == full_build(tmp_path, remote, "two-files")


def test_each_kind_of_push_refreshes_to_exactly_what_a_full_build_serves(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin", files={**FILES, "keys/notes.txt": "plain\n"})
    os.symlink("src/app.py", remote.work / "entry.py")
    remote.commit({})
    mirrors = mirrors_for(tmp_path / "host", remote)
    assert mirrors.sync("app").ok

    git("-C", str(remote.work), "mv", "src/util.py", "src/helpers.py")  # a rename
    remote.commit({"docs/guide.md": None})  # a deletion
    git("-C", str(remote.work), "mv", "config.py", ".env")  # its blob (copy_of_config.py's too) turns secret
    (remote.work / "entry.py").unlink()
    os.symlink("src/helpers.py", remote.work / "entry.py")  # a link moved
    remote.commit(
        {f"docs/{TOKEN_NAME}.md": "a token in a file name\n", "src/app.py": "def main():\n    pass\n"}
    )
    for label in ("rename, deletion, secret, link, token name", "a second push on the first"):
        assert mirrors.sync("app").ok
        assert everything_served(mirrors) == full_build(tmp_path, remote, label.split(",")[0]), label
        remote.commit({"src/app.py": "def main():\n    return 2\n"})

    after = everything_served(mirrors)
    tree, redacted = after["tree"], after["redacted"]
    assert tree["entry.py"] == ("link", "src/helpers.py")  # type: ignore[index]
    assert b"withheld" in tree["copy_of_config.py"][1] and ".env" not in tree  # type: ignore[index,operator]
    assert redacted == {f"docs/{TOKEN_NAME}.md": "docs/[REDACTED:github-token].md"}


def test_a_force_push_refreshes_to_exactly_what_a_full_build_serves(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin", files=FILES)
    remote.commit({"src/leak.py": "print('pushed by mistake')\n", "src/app.py": "def main():\n    pass\n"})
    mirrors = mirrors_for(tmp_path / "host", remote)
    assert mirrors.sync("app").ok
    assert "src/leak.py" in everything_served(mirrors)["tree"]  # type: ignore[operator]

    remote.force_push_replacing_last_commit({"src/util.py": "def helper():\n    return 9\n"})
    assert mirrors.sync("app").ok

    after = everything_served(mirrors)
    assert "src/leak.py" not in after["tree"]  # type: ignore[operator]
    assert not any(path == b"src/leak.py" for path, _digest, _size in after["search"])  # type: ignore[attr-defined]
    assert after == full_build(tmp_path, remote, "force-push")
