"""Refreshes racing each other and questions, across threads and processes, with real git."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.git_remote import (
    LEASE_HOLDER,
    SYNCER,
    GitRemote,
    mirrors_for,
    snapshot_entries,
    start_python,
)
from worker.repos.mirrors import SyncResult


def test_two_concurrent_syncs_of_one_repo_never_run_at_once_and_both_end_consistent(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    mirrors = mirrors_for(tmp_path, remote)
    events: list[tuple[str, str]] = []
    second_is_waiting = threading.Event()
    results: dict[str, SyncResult] = {}

    def progress_of(who: str) -> Callable[[str, float | None], None]:
        def report(message: str, fraction: float | None) -> None:
            events.append((who, message))
            if who == "second" and message == "waiting for another refresh":
                second_is_waiting.set()
            if who == "first" and message == "connecting":  # hold the first sync mid-refresh
                assert second_is_waiting.wait(60), "the second sync never had to wait"  # a hang guard

        return report

    first = threading.Thread(target=lambda: results.update(first=mirrors.sync("app", progress_of("first"))))
    first.start()
    while not events:  # the first sync holds the refresh lock before the second starts
        threading.Event().wait(0.01)
    results["second"] = mirrors.sync("app", progress_of("second"))
    first.join(60)

    order = [who for who, message in events if message != "waiting for another refresh"]
    assert order == sorted(order, key=["first", "second"].index)  # all of the first, then the second
    assert results["first"].ok and results["first"].changed and not results["first"].waited
    assert results["second"].ok and not results["second"].changed and results["second"].waited
    assert results["first"].sha == results["second"].sha == remote.sha()


@pytest.mark.slow  # four Python processes starting at once: minutes at load 16 on 2 cores
def test_concurrent_syncs_in_separate_processes_agree_on_one_snapshot(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin", files={f"f{i}.txt": f"{i}\n" for i in range(300)})
    mirrors = mirrors_for(tmp_path, remote)
    args = (str(tmp_path / "data"), str(tmp_path / "repos.toml"), "app")

    children = [start_python(SYNCER, *args) for _ in range(4)]
    results = [json.loads(child.communicate(timeout=300)[0]) for child in children]

    assert all(r["ok"] and r["sha"] == remote.sha() for r in results)
    assert sum(r["changed"] for r in results) == 1  # exactly one built it; the others found it done
    sha = remote.sha()
    assert snapshot_entries(mirrors) == [sha, f"{sha}.blobs", f"{sha}.json", f"{sha}.lock"]
    current = mirrors.current("app")
    assert current is not None and len(list(current.root.iterdir())) == current.meta.file_count == 300


def test_a_killed_lease_holder_does_not_pin_a_snapshot_forever(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    mirrors = mirrors_for(tmp_path, remote)
    old = mirrors.sync("app").sha
    holder = start_python(LEASE_HOLDER, str(tmp_path / "data"), str(tmp_path / "repos.toml"), "app")
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == old
        remote.commit({"src/app.py": "print('v2')\n"})
        assert mirrors.sync("app").changed
        assert mirrors.gc("app") == []  # the holder still reads the old commit
    finally:
        holder.send_signal(signal.SIGKILL)  # dies without releasing anything itself
        holder.communicate(timeout=10)

    assert mirrors.gc("app") == [old]
    assert not (tmp_path / "data/repos/app/snapshots" / old).exists()


def test_questions_leasing_during_many_refreshes_always_see_one_whole_commit(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin", files={"version.txt": "0\n", "copy.txt": "0\n"})
    mirrors = mirrors_for(tmp_path, remote)
    mirrors.sync("app")
    stop = threading.Event()
    problems: list[str] = []
    leases = 0

    def question_loop() -> None:
        nonlocal leases
        while not stop.is_set():
            with mirrors.lease(["app"]) as snapshots:
                root = snapshots["app"].root
                try:
                    version = (root / "version.txt").read_text()
                    time.sleep(0.002)  # a question reads over time, while refreshes go on
                    copy = (root / "copy.txt").read_text()
                except OSError as exc:
                    problems.append(f"{snapshots['app'].sha}: {exc}")
                    continue
                if version != copy:
                    problems.append(f"{snapshots['app'].sha}: {version!r} != {copy!r}")
                leases += 1

    readers = [threading.Thread(target=question_loop) for _ in range(3)]
    for reader in readers:
        reader.start()
    for n in range(1, 8):
        remote.commit({"version.txt": f"{n}\n", "copy.txt": f"{n}\n"})
        assert mirrors.sync("app").ok
    stop.set()
    for reader in readers:
        reader.join(10)

    assert problems == [] and leases > 0
    mirrors.gc("app")  # snapshots still leased during the last refresh go now
    sha = remote.sha()
    assert snapshot_entries(mirrors) == [sha, f"{sha}.blobs", f"{sha}.json", f"{sha}.lock"]
