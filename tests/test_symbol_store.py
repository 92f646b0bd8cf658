"""References as the blob store keeps them (format 2): the lines of a name in one file packed into
one row. What a user sees must not depend on the packing: every use, in order, counted, cut at
the limit, and only the uses of the files the snapshot has now."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.support.git_remote import GitRemote, mirrors_for, mirrors_of
from worker.repos.blobstore import BlobStore
from worker.repos.mirrors import Mirrors
from worker.repos.ref_lines import count_lines, pack_lines, unpack_lines
from worker.repos.symbols import Reference, index_path, open_index
from worker.tools import build_registry, make_context

# Lines far apart (one-, two- and three-byte gaps once packed) and a file of tests, listed last.
USES = {"src/a.py": [2, 3, 200, 20_000], "src/b/c.py": [1, 129, 130], "tests/test_clock.py": [2, 4]}
USES.update({f"src/user_{n:02}.py": [1, 3 + n, 150 + 7 * n] for n in range(12)})


def source(lines: list[int]) -> str:
    """A Python file calling tick() on exactly these lines (1-based)."""
    wanted = set(lines)
    return "".join("tick()\n" if n in wanted else "x = 0\n" for n in range(1, max(lines) + 1))


def expected(uses: dict[str, list[int]]) -> list[tuple[str, int]]:
    code_first = sorted(uses, key=lambda path: (path.startswith("tests/"), path))
    return [(path, line) for path in code_first for line in sorted(uses[path])]


def synced(tmp_path: Path, uses: dict[str, list[int]]) -> tuple[GitRemote, Mirrors]:
    files = {"src/clock.py": "def tick():\n    return 1\n"} | {p: source(lines) for p, lines in uses.items()}
    remote = GitRemote.create(tmp_path / "origin", files=files)
    mirrors = mirrors_for(tmp_path, remote)
    assert mirrors.sync("app").ok
    return remote, mirrors


def references(mirrors: Mirrors, name: str, limit: int) -> tuple[list[tuple[str, int]], int]:
    snapshot = mirrors.current("app")
    assert snapshot is not None
    index = open_index(snapshot.root)
    try:
        found, total = index.references(name, limit)
    finally:
        index.close()
    return [(r.path, r.line) for r in found], total


def test_a_name_used_on_many_lines_of_many_files_comes_back_in_order_with_its_total_and_limit(
    tmp_path: Path,
) -> None:
    _, mirrors = synced(tmp_path, USES)
    every = expected(USES)
    assert len(every) == 45

    for limit in (0, 1, 4, 5, 44, 45, 1000):
        assert references(mirrors, "tick", limit) == (every[:limit], 45)

    with mirrors.lease(["app"]) as snapshots:
        ctx = make_context(mirrors.settings, snapshots)
        text = build_registry().call(ctx, "find_references", {"symbol": "tick"}).text
    assert text.startswith("Showing 45 of 45") or text.startswith("45 line(s) using 'tick'")
    assert (
        text.index("app:src/a.py") < text.index("app:src/user_11.py") < text.index("app:tests/test_clock.py")
    )
    assert "  20000│ tick()" in text


def test_a_file_whose_uses_change_on_refresh_shows_only_its_new_lines(tmp_path: Path) -> None:
    remote, mirrors = synced(tmp_path, USES)

    remote.commit({"src/a.py": source([7, 300])})
    assert mirrors.sync("app").ok

    found, total = references(mirrors, "tick", 1000)
    assert [line for path, line in found if path == "src/a.py"] == [7, 300]
    assert total == 45 - 4 + 2
    assert found == expected({**USES, "src/a.py": [7, 300]})


def test_references_of_deleted_files_never_show_and_their_rows_are_dropped(tmp_path: Path) -> None:
    remote, mirrors = synced(tmp_path, USES)
    gone = [path for path in USES if path.startswith("src/user_")]

    remote.commit(dict.fromkeys(gone))
    assert mirrors.sync("app").ok

    left = {path: lines for path, lines in USES.items() if path not in gone}
    assert references(mirrors, "tick", 1000) == (expected(left), 9)
    store = BlobStore(mirrors.settings.data_dir.resolve())
    with sqlite3.connect(store.db_path) as db:
        # 12 of 16 files deleted at once: far past the share at which the stale rows are dropped.
        orphans = db.execute("SELECT count(*) FROM refs WHERE unit NOT IN (SELECT id FROM units)").fetchone()
    assert orphans == (0,)


def test_two_repos_on_one_host_each_find_only_their_own_uses_of_each_name(tmp_path: Path) -> None:
    defined = "def tick():\n    return 1\n\ndef alpha():\n    pass\n\ndef beta():\n    pass\n"
    first = GitRemote.create(tmp_path / "one", files={"defs.py": defined, "use.py": "tick()\nalpha()\n"})
    second = GitRemote.create(
        tmp_path / "two", files={"defs.py": defined, "use.py": "x = 1\nbeta()\ntick()\n"}
    )
    mirrors = mirrors_of(tmp_path, {"one": first, "two": second})
    assert mirrors.sync("one").ok and mirrors.sync("two").ok  # two builds: the second numbers `beta`

    def uses(name: str, symbol: str) -> list[int]:
        snapshot = mirrors.current(name)
        assert snapshot is not None
        index = open_index(snapshot.root)
        try:
            return [r.line for r in index.references(symbol, 10)[0]]
        finally:
            index.close()

    assert [uses("one", s) for s in ("tick", "alpha", "beta")] == [[1], [2], []]
    assert [uses("two", s) for s in ("tick", "alpha", "beta")] == [[3], [], [2]]


def test_lines_far_apart_or_repeated_come_back_from_packing_sorted_and_once() -> None:
    lines = [5, 1, 1, 128, 129, 16_512, 2_000_000, 3]

    packed = pack_lines(lines)

    assert unpack_lines(packed) == [1, 3, 5, 128, 129, 16_512, 2_000_000]
    assert count_lines(packed) == 7 and len(packed) < 7 * 3
    assert unpack_lines(pack_lines([1, 2, 3])) == [1, 2, 3] and pack_lines([1, 2, 3]) == b"\x01\x01\x01"
    assert unpack_lines(pack_lines([])) == [] and count_lines(b"") == 0


def test_a_snapshot_indexed_before_the_store_format_changed_still_answers_references(tmp_path: Path) -> None:
    _, mirrors = synced(tmp_path, USES)
    snapshot = mirrors.current("app")
    assert snapshot is not None
    store = BlobStore(mirrors.settings.data_dir.resolve())
    old = store.root / "gold" / "store.sqlite"  # the same symbols, one row per referenced line
    old.parent.mkdir()
    with sqlite3.connect(old) as db:
        db.execute("ATTACH ? AS new", (str(store.db_path),))
        db.executescript(
            "CREATE TABLE units AS SELECT * FROM new.units; "
            "CREATE TABLE defs AS SELECT unit, name, kind, container, line, end_line FROM new.defs; "
            "CREATE TABLE names AS SELECT id, name FROM new.names; "
            "CREATE TABLE refs (name_id INTEGER, unit INTEGER, line INTEGER);"
        )
        rows = db.execute("SELECT name_id, unit, lines FROM new.refs").fetchall()
        db.executemany("INSERT INTO refs VALUES (?, ?, ?)", [(n, u, line) for n, u, packed in rows
                                                              for line in unpack_lines(packed)])  # fmt: skip
    with sqlite3.connect(index_path(snapshot.root)) as manifest:
        manifest.execute(
            "UPDATE meta SET value = ? WHERE key = 'store'", ("../../../blobs/gold/store.sqlite",)
        )

    index = open_index(snapshot.root)
    try:
        assert not index.packed_refs
        found, total = index.references("tick", 5)
    finally:
        index.close()
    assert ([(r.path, r.line) for r in found], total) == (expected(USES)[:5], 45)


def test_a_snapshot_a_question_still_reads_keeps_its_index_but_not_its_build_record(tmp_path: Path) -> None:
    remote, mirrors = synced(tmp_path, USES)
    first = mirrors.current("app")
    assert first is not None
    manifests = mirrors.root / "app" / "manifests"

    with mirrors.lease(["app"]) as snapshots:
        remote.commit({"src/a.py": source([7])})
        assert mirrors.sync("app").ok
        second = mirrors.current("app")
        assert second is not None and second.sha != first.sha
        # Only the served snapshot's record is the base of the next build: the old one's is gone.
        assert sorted(p.name for p in manifests.iterdir() if p.name.startswith(first.sha)) == [
            f"{first.sha}.paths",
            f"{first.sha}.sqlite",
        ]
        assert (manifests / f"{second.sha}.build").is_file()
        index = open_index(snapshots["app"].root)  # the question's snapshot still answers
        try:
            assert index.references("tick", 3)[0][0] == Reference("tick", "src/a.py", 2)
        finally:
            index.close()

    remote.commit({"src/b/c.py": source([5])})
    assert mirrors.sync("app").ok  # from the second snapshot's record
    assert references(mirrors, "tick", 2) == ([("src/a.py", 7), ("src/b/c.py", 5)], 45 - 4 + 1 - 3 + 1)
