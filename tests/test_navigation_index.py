"""The symbol index's life: built with the snapshot from symbols parsed once per blob, reused by
every question and every later snapshot, removed with its snapshot."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.support.git_remote import GitRemote, mirrors_for
from tests.support.polyglot import POLYGLOT
from worker.repos.blobstore import BlobStore
from worker.repos.mirrors import Mirrors
from worker.repos.symbols import index_path
from worker.tools import build_registry, make_context

FILES = {path: str(POLYGLOT[path]) for path in ("payments/retry.py", "payments/api.py", "worker/main.go")}


def synced(tmp_path: Path) -> tuple[GitRemote, Mirrors]:
    remote = GitRemote.create(tmp_path / "origin", files=FILES)
    mirrors = mirrors_for(tmp_path, remote)
    assert mirrors.sync("app").ok
    return remote, mirrors


def ask_definition(mirrors: Mirrors, symbol: str) -> str:
    """One question's worth of tool use: a lease, a fresh context, one call."""
    with mirrors.lease(["app"]) as snapshots:
        ctx = make_context(mirrors.settings, snapshots)
        return build_registry().call(ctx, "find_definition", {"symbol": symbol}).text


def test_the_index_is_built_when_the_snapshot_is_made_and_reused_by_later_questions(tmp_path: Path) -> None:
    _, mirrors = synced(tmp_path)
    snapshot = mirrors.current("app")
    assert snapshot is not None
    index = index_path(snapshot.root)
    assert index == mirrors.root / "app" / "manifests" / f"{snapshot.sha}.sqlite" and index.is_file()
    before = index.stat()

    first = ask_definition(mirrors, "retry")
    second = ask_definition(mirrors, "Queue.enqueue")

    assert "function retry (Python), lines 6-13" in first and "method Queue.enqueue" in second
    after = index.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def parsed_units(mirrors: Mirrors) -> set[tuple[int, str]]:
    """(unit id, blob) of every blob parsed in the host's store."""
    store = BlobStore(mirrors.settings.data_dir.resolve())
    with sqlite3.connect(store.db_path) as db:
        return set(db.execute("SELECT id, blob FROM units"))


def test_a_refresh_parses_only_the_files_that_changed_and_reuses_the_rest(tmp_path: Path) -> None:
    remote, mirrors = synced(tmp_path)
    before = parsed_units(mirrors)
    assert len(before) == 3  # the two Python files and the Go file

    remote.commit({"payments/api.py": "def refund(card):\n    return card\n"})
    assert mirrors.sync("app").ok

    after = parsed_units(mirrors)
    assert len(after - before) == 1  # one blob parsed: the new api.py
    assert len(before & after) == 2  # the unchanged files keep their rows (the old api.py's went with GC)
    assert "function refund (Python), lines 1-2" in ask_definition(mirrors, "refund")
    assert "function retry (Python)" in ask_definition(mirrors, "retry")  # an unchanged file's rows


def test_the_index_of_a_replaced_snapshot_is_removed_with_it(tmp_path: Path) -> None:
    remote, mirrors = synced(tmp_path)
    first = mirrors.current("app")
    remote.commit({"payments/api.py": "def refund(card):\n    return card\n"})

    assert mirrors.sync("app").ok

    second = mirrors.current("app")
    assert first is not None and second is not None and second.sha != first.sha
    names = sorted(p.name for p in (mirrors.root / "app" / "manifests").iterdir())
    # the path manifest and the build record go too
    assert names == [f"{second.sha}.build", f"{second.sha}.paths", f"{second.sha}.sqlite"]
    assert "function refund (Python), lines 1-2" in ask_definition(mirrors, "refund")


def test_after_a_refresh_the_names_it_removed_are_not_suggested_and_the_ones_it_kept_are_found(
    tmp_path: Path,
) -> None:
    files = {
        "a.py": "def alpha_one():\n    pass\n\n\ndef shared():\n    pass\n",
        "b.py": "def shared():\n    pass\n",
    }
    remote = GitRemote.create(tmp_path / "origin", files=files)
    mirrors = mirrors_for(tmp_path, remote)
    assert mirrors.sync("app").ok
    assert "Did you mean: alpha_one" in ask_definition(mirrors, "alpha")

    remote.commit({"a.py": "def alpha_two():\n    pass\n"})  # alpha_one and one `shared` gone
    assert mirrors.sync("app").ok

    miss = ask_definition(mirrors, "alpha")
    assert "Did you mean: alpha_two" in miss and "alpha_one" not in miss
    assert "1 definition of 'shared':" in ask_definition(mirrors, "shared")
    assert "function alpha_two (Python)" in ask_definition(mirrors, "alpha_two")
