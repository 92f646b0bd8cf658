"""A refresh reuses what the previous build decided (worker/repos/build_record.py) and yields
exactly the snapshot a fresh build of the same commit yields: files, placeholders, links, the
manifest, the symbol index and the metadata; secrets decided by lineage are decided anew."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.support.git_remote import GitRemote, git, make_mirrors, mirrors_for
from worker.repos import assemble, blob_pool, lineage, materialize
from worker.repos import mirrors as mirrors_module
from worker.repos.build_record import record_path
from worker.repos.cleanup import BackgroundCleaner
from worker.repos.deferred_index import finish_index
from worker.repos.mirrors import Mirrors
from worker.repos.snapshot import Snapshot
from worker.repos.symbols import index_path
from worker.tools import build_registry, make_context

FILES = {
    "README.md": "# demo\n",
    "src/app.py": "def main():\n    return helper()\n",
    "src/util.py": "def helper():\n    return 1\n",
    "src/deep/a/b/c.py": "class Deep:\n    pass\n",
    "docs/guide.md": "how to\n",
    "config.py": "DEBUG = True\n",
    "copy_of_config.py": "DEBUG = True\n",  # the same blob as config.py
}


REGISTRY = build_registry()


def call(mirrors: Mirrors, snapshots: dict[str, Snapshot], name: str, **arguments: object) -> str:
    return REGISTRY.call(make_context(mirrors.settings, snapshots), name, arguments).text


def served(mirrors: Mirrors) -> dict[str, object]:
    """Everything a question can see of the current snapshot, independent of the store's ids."""
    snapshot = mirrors.current("app")
    assert snapshot is not None
    root = snapshot.root
    tree = {}
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            tree[rel] = (
                ("link", os.readlink(path)) if os.path.islink(path) else ("file", Path(path).read_bytes())
            )
    index = index_path(root)
    with sqlite3.connect(index) as db:
        rows = sorted(db.execute("SELECT path, language, family, is_test FROM files"))
        skipped = sorted(db.execute("SELECT path, reason FROM skipped"))
        store = (index.parent / dict(db.execute("SELECT key, value FROM meta"))["store"]).resolve()
        db.execute("ATTACH DATABASE ? AS s", (str(store),))
        symbols = sorted(
            db.execute("SELECT f.path, d.name, d.kind, d.line FROM files f JOIN s.defs d ON d.unit = f.unit")
        )
    manifest = json.loads(index.with_suffix(".paths").read_text())
    return {
        "tree": tree,
        "index": rows,
        "symbols": symbols,
        "skipped": skipped,
        "manifest": manifest["entries"],
        "ignored": manifest["ignored"],  # what the snapshot's ignore files hide from search
        "meta": snapshot.meta,
    }


def fresh_build(tmp_path: Path, remote: GitRemote) -> dict[str, object]:
    mirrors = mirrors_for(tmp_path / "fresh", remote)
    assert mirrors.sync("app").ok
    return served(mirrors)


def test_a_refresh_from_the_previous_build_serves_what_a_fresh_build_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole_listings: list[str] = []
    list_tree = assemble.list_tree
    monkeypatch.setattr(assemble, "list_tree", lambda *a: whole_listings.append(a[1]) or list_tree(*a))
    remote = GitRemote.create(tmp_path / "origin", files=FILES)
    mirrors = mirrors_for(tmp_path / "host", remote)
    assert mirrors.sync("app").ok
    old = mirrors.current("app")
    assert old is not None and record_path(index_path(old.root)).is_file()

    remote.commit({"src/util.py": "def helper():\n    return 2\n", "src/new.py": "def added():\n    pass\n",
                   "docs/guide.md": None, "src/deep/a/b/c.py": "class Deeper:\n    pass\n"})  # fmt: skip
    git("-C", str(remote.work), "rm", "-q", "README.md")
    os.symlink("src/app.py", remote.work / "README.md")  # a file that becomes a link
    remote.commit({".gitignore": "src/new.py\n"})  # a new ignore file hides a new file from search
    assert mirrors.sync("app").ok
    assert len(whole_listings) == 1  # the refresh listed only what changed

    assert served(mirrors) == fresh_build(tmp_path, remote)
    tree = served(mirrors)["tree"]
    assert tree["README.md"] == ("link", "src/app.py")  # type: ignore[index]
    assert "docs/guide.md" not in tree  # type: ignore[operator]


def test_an_unchanged_file_whose_blob_a_later_commit_names_secret_is_withheld_by_the_refresh(
    tmp_path: Path,
) -> None:
    remote = GitRemote.create(tmp_path / "origin", files=FILES)
    mirrors = mirrors_for(tmp_path / "host", remote)
    assert mirrors.sync("app").ok
    assert served(mirrors)["tree"]["copy_of_config.py"] == ("file", b"DEBUG = True\n")  # type: ignore[index]

    git("-C", str(remote.work), "mv", "config.py", ".env")  # now the blob has had a secret name
    remote.commit({})
    assert mirrors.sync("app").ok

    kind, content = served(mirrors)["tree"]["copy_of_config.py"]  # type: ignore[index]
    assert kind == "file" and b"DEBUG" not in content and b"withheld" in content
    assert served(mirrors) == fresh_build(tmp_path, remote)


def test_a_damaged_build_record_means_a_full_build_not_a_wrong_one(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin", files=FILES)
    mirrors = mirrors_for(tmp_path / "host", remote)
    assert mirrors.sync("app").ok
    old = mirrors.current("app")
    assert old is not None
    record_path(index_path(old.root)).write_bytes(b"not a record")

    remote.commit({"src/util.py": "def helper():\n    return 3\n"})
    assert mirrors.sync("app").ok

    assert served(mirrors) == fresh_build(tmp_path, remote)
    assert b"return 3" in served(mirrors)["tree"]["src/util.py"][1]  # type: ignore[index]


def test_a_changed_ignore_file_lists_the_files_again(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin", files={**FILES, ".gitignore": "*.log\n"})
    mirrors = mirrors_for(tmp_path / "host", remote)
    assert mirrors.sync("app").ok
    deep = ("src/deep/a/b/c.py", "Python", "python", 0)
    assert deep in served(mirrors)["index"]  # type: ignore[operator]

    remote.commit({".gitignore": "*.log\nsrc/deep/\n"})  # search no longer looks into src/deep
    assert mirrors.sync("app").ok

    assert deep not in served(mirrors)["index"]  # type: ignore[operator]
    assert served(mirrors) == fresh_build(tmp_path, remote)


def test_a_refresh_no_question_reads_from_writes_only_the_changed_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {f"pkg{d}/m{i}.py": f"X{i} = {d}\n" for d in range(5) for i in range(20)}
    remote = GitRemote.create(tmp_path / "origin", files=files)
    mirrors = mirrors_for(tmp_path / "host", remote)
    assert mirrors.sync("app").ok
    linked: list[str] = []
    link = materialize._link
    monkeypatch.setattr(materialize, "_link", lambda source, to: linked.append(to) or link(source, to))

    remote.commit({"pkg1/m3.py": "X3 = 'changed'\n", "pkg4/new.py": "Y = 1\n"})
    assert mirrors.sync("app").ok

    assert sorted(name.rsplit("/", 2)[-2] + "/" + name.rsplit("/", 1)[-1] for name in linked) == [
        "pkg1/m3.py",
        "pkg4/new.py",
    ]  # the 98 other files came over in their folders
    assert served(mirrors) == fresh_build(tmp_path, remote)


def test_a_refresh_while_a_question_reads_the_old_snapshot_leaves_it_whole(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin", files=FILES)
    mirrors = mirrors_for(tmp_path / "host", remote)
    assert mirrors.sync("app").ok
    before = served(mirrors)

    with mirrors.lease(["app"]) as snapshots:
        old = snapshots["app"]
        remote.commit({"src/util.py": "def helper():\n    return 5\n"})
        assert mirrors.sync("app").ok
        assert (old.root / "src/util.py").read_text() == "def helper():\n    return 1\n"
        assert sorted(p.name for p in (old.root / "src").iterdir()) == ["app.py", "deep", "util.py"]
        assert (old.root / "README.md").read_bytes() == before["tree"]["README.md"][1]  # type: ignore[index]

    assert served(mirrors) == fresh_build(tmp_path, remote)


def test_a_build_that_fails_after_taking_the_old_snapshot_apart_puts_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = GitRemote.create(tmp_path / "origin", files=FILES)
    mirrors = mirrors_for(tmp_path / "host", remote)
    assert mirrors.sync("app").ok
    before = served(mirrors)

    def no_room(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(assemble, "write_manifest", no_room)  # after the folders were moved over
    remote.commit({"src/util.py": "def helper():\n    return 6\n"})
    result = mirrors.sync("app")

    assert not result.ok and "No space left" in (result.error or "")
    assert served(mirrors) == before  # still served, whole
    with mirrors.lease(["app"]) as snapshots:
        assert (snapshots["app"].root / "src/deep/a/b/c.py").is_file()


def test_a_windowed_mirror_reads_only_the_new_commits_history_at_a_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = GitRemote.create(tmp_path / "origin", files=FILES)
    for number in range(4):
        remote.commit({f"src/m{number}.py": f"X = {number}\n"}, f"Add module {number}")
    entry = [{"name": "app", "url": str(remote.bare), "branch": "main", "history_depth": 3}]
    mirrors = make_mirrors(tmp_path / "host", entry)
    assert mirrors.sync("app").ok
    read: list[list[str]] = []
    entry_of = lineage._entry
    monkeypatch.setattr(
        lineage, "_entry", lambda head, paths, *rest: read.append(paths) or entry_of(head, paths, *rest)
    )

    remote.commit({"src/m9.py": "X = 9\n"}, "Add module 9")
    assert mirrors.sync("app").ok

    assert read and all(paths == ["src/m9.py"] for paths in read)  # the window's other commits: not again


def test_the_next_sync_of_a_repo_reuses_its_warm_blob_processor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = GitRemote.create(tmp_path / "origin", files=FILES)
    mirrors = mirrors_for(tmp_path / "host", remote)
    started: list[str] = []
    start = blob_pool._start
    monkeypatch.setattr(blob_pool, "_start", lambda *args: started.append("x") or start(*args))
    assert mirrors.sync("app").ok
    first = len(started)

    remote.commit({"src/util.py": "def helper():\n    return 7\n"})
    assert mirrors.sync("app").ok

    assert first >= 1 and len(started) == first  # the changed blob went to the processor kept warm
    assert b"return 7" in served(mirrors)["tree"]["src/util.py"][1]  # type: ignore[index]


def test_a_forked_child_never_takes_its_parents_warm_processors(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin", files=FILES)
    mirrors = mirrors_for(tmp_path / "host", remote)
    assert mirrors.sync("app").ok  # leaves a processor warm in this process
    assert blob_pool._WARM._idle
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        taken = [blob_pool._WARM.take(key) for _, key, _ in list(blob_pool._WARM._idle)]
        os.write(writer, b"none" if not any(taken) else b"took")
        os._exit(0)
    os.close(writer)
    os.waitpid(child, 0)
    assert os.read(reader, 10) == b"none"
    assert blob_pool._WARM._idle  # the parent's are still there


def test_a_first_sync_serves_before_its_code_is_parsed_and_the_index_says_so_until_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        mirrors_module, "PARSE_LATER_OVER", 3
    )  # more files than that are parsed after serving
    remote = GitRemote.create(tmp_path / "origin", files=FILES)
    mirrors = mirrors_for(tmp_path / "host", remote)
    seen: list[str] = []

    def finish_after_a_look(settings: object, git_dir: Path, index: Path, report: object) -> int:
        with mirrors.lease(["app"]) as snapshots:  # a question asking now is served
            seen.append(call(mirrors, snapshots, "find_definition", symbol="helper"))
            seen.append(call(mirrors, snapshots, "read_file", repo="app", path="src/util.py"))
        return finish_index(settings, git_dir, index, report)  # type: ignore[arg-type]

    monkeypatch.setattr(mirrors_module, "finish_index", finish_after_a_look)
    assert mirrors.sync("app").ok

    assert "still being built" in seen[0] and "src/util.py" not in seen[0]
    assert "def helper" in seen[1]
    with mirrors.lease(["app"]) as snapshots:
        assert "[app:src/util.py#L1-L2]  function helper" in call(
            mirrors, snapshots, "find_definition", symbol="helper"
        )
        assert "still being built" not in call(mirrors, snapshots, "repo_overview", repo="app")


def test_a_refresh_while_a_question_reads_takes_the_spare_apart_and_leaves_the_read_snapshot_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {f"pkg{d}/m{i}.py": f"X{i} = {d}\n" for d in range(4) for i in range(10)}
    remote = GitRemote.create(tmp_path / "origin", files=files)
    plain = mirrors_for(tmp_path / "host", remote)
    cleaner = BackgroundCleaner()
    mirrors = Mirrors(plain.settings, plain.whitelist, cleaner)  # as a worker runs them
    assert mirrors.sync("app").ok
    cleaner.wait()  # the spare of the served snapshot is linked in the background
    linked: list[str] = []
    link = materialize._link
    monkeypatch.setattr(materialize, "_link", lambda source, to: linked.append(to) or link(source, to))

    with mirrors.lease(["app"]) as snapshots:
        old = snapshots["app"]
        remote.commit({"pkg2/m5.py": "X5 = 'changed'\n"})
        assert mirrors.sync("app").ok
        assert len(linked) == 1  # the changed file; the other 39 came from the spare
        assert sorted(p.name for p in old.root.iterdir()) == ["pkg0", "pkg1", "pkg2", "pkg3"]
        assert (old.root / "pkg2/m5.py").read_text() == "X5 = 2\n" and len(list(old.root.rglob("*.py"))) == 40

    cleaner.wait()
    assert served(mirrors) == fresh_build(tmp_path, remote)
    current = mirrors.current("app")
    assert current is not None
    spares = sorted(
        p.name for p in (mirrors.root / "app" / "snapshots").iterdir() if p.name.startswith(".spare-")
    )
    assert spares == [f".spare-{current.sha}", f".spare-{current.sha}.blobs"]  # the old one's is gone
    leftovers = [
        p.name
        for p in (mirrors.root / "app" / "snapshots").iterdir()
        if p.name.startswith((".trash", ".taking"))
    ]
    assert leftovers == []


def test_a_sync_from_the_command_line_keeps_no_spare(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin", files=FILES)
    mirrors = mirrors_for(tmp_path / "host", remote)  # runs its cleanups at once, as `codebot repos sync`

    assert mirrors.sync("app").ok

    assert not [p for p in (mirrors.root / "app" / "snapshots").iterdir() if p.name.startswith(".spare-")]
