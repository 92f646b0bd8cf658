"""A push reaches every worker machine at once, not at each one's next periodic check.

Machine A is the webhooks rig (its data dir, its embedded Redis, a real RQ worker running the
refreshes the deliveries queued); machine B has a data dir of its own and reaches that Redis
through REDIS_URL, as a second host would. Pushes are real `git push`es to a bare repo.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rq.suspension import resume, suspend

from config.settings import Settings
from tests.support.git_remote import write_whitelist
from tests.support.slack_rig import wait_until
from tests.support.webhooks_rig import HooksRig, build_hooks_rig, push_from
from tests.support.worker_procs import SETTLE_SECONDS, start_worker, stop_worker
from worker.jobs.housekeeping import follow_pass
from worker.jobs.runtime import build_runtime
from worker.ops.redis_connection import socket_path
from worker.repos.announcements import newest_entry_id
from worker.repos.mirror_state import RepoPaths, current_sha
from worker.repos.refresh import local_sha, record_refresh

AN_HOUR = 3600.0  # machine B's periodic check: never reached within a test


@pytest.fixture
def hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HooksRig]:
    yield from build_hooks_rig(tmp_path, monkeypatch)


def machine(hooks: HooksRig, folder: Path) -> Settings:
    """A worker host following `payments` (the repo GitHub pushes to in the rig): its own data
    dir, the rig's Redis through REDIS_URL, a periodic check only once an hour."""
    entry = {"name": "payments", "url": str(hooks.remote.bare), "branch": "main"}
    write_whitelist(folder, [entry | {"web_url": "https://github.com/acme/payments"}])
    return hooks.settings.model_copy(
        update={
            "data_dir": folder / "data",
            "repos_file": folder / "repos.toml",
            "redis_url": f"unix://{socket_path(hooks.settings)}",
            "refresh_check_seconds": AN_HOUR,
            # workers need no webhook secret; without one, no scheduled poll either
            **{f"webhooks_{forge}_secret": None for forge in ("github", "gitlab", "gitea", "bitbucket")},
        }
    )


def push_and_deliver(hooks: HooksRig, number: int) -> str:
    sha = hooks.remote.commit({"CHANGELOG.md": f"v{number}\n"}, f"release {number}")
    assert hooks.post(push_from("github", sha))[0] == 202
    return sha


def serves(settings: Settings) -> str | None:
    return current_sha(RepoPaths(settings.data_dir.resolve() / "repos" / "payments"))


def syncs_logged(log: Path) -> int:
    """The machine's syncs of the repo: refreshes it ran, catch-ups to one recorded elsewhere."""
    text = log.read_text()
    return text.count("push refresh of payments") + text.count("catch-up of payments")


def synced(machines: list[Settings], logs: list[Path], sha: str, syncs: int) -> bool:
    """Every machine serves `sha` and has logged `syncs` syncs or more."""
    return all(
        serves(settings) == sha and syncs_logged(log) >= syncs
        for settings, log in zip(machines, logs, strict=True)
    )


@pytest.mark.slow
def test_a_burst_of_fifty_pushes_reaches_both_worker_machines_with_one_sync_each_before_any_periodic_check(
    hooks: HooksRig, tmp_path: Path
) -> None:
    record_refresh(hooks.redis, hooks.runtime.mirrors, hooks.runtime.mirrors.sync("payments"), "host-0")
    first = hooks.served("payments")
    suspend(hooks.redis)  # the workers take no job until the whole burst has landed
    machines = [machine(hooks, tmp_path / name) for name in ("machine-a", "machine-b")]
    logs = [tmp_path / f"{name}.log" for name in ("machine-a", "machine-b")]
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "k"}
    workers = [start_worker(settings, log=log, **env) for settings, log in zip(machines, logs, strict=True)]
    try:  # each machine's first check syncs the recorded commit; the next one is an hour away
        wait_until(lambda: synced(machines, logs, first, 1), timeout=SETTLE_SECONDS)
        newest = [push_and_deliver(hooks, number) for number in range(50)][-1]
        assert hooks.queued() == 1
        resume(hooks.redis)  # one machine takes the refresh; the other hears of it at once
        wait_until(lambda: synced(machines, logs, newest, 2), timeout=SETTLE_SECONDS)
    finally:
        for worker in workers:
            stop_worker(worker)
    assert [syncs_logged(log) for log in logs] == [2, 2]  # the first check's, then one for the burst


def test_a_machine_busy_while_five_pushes_were_refreshed_catches_up_once_to_the_newest(
    hooks: HooksRig, tmp_path: Path
) -> None:
    b = build_runtime(machine(hooks, tmp_path / "machine-b"))
    before = b.mirrors.sync("payments").sha
    after = newest_entry_id(hooks.redis)
    for number in range(5):  # five pushes, each refreshed on machine A before the next
        newest = push_and_deliver(hooks, number)
        hooks.work()
    assert local_sha(b.mirrors, "payments") == before != newest
    after, syncs = follow_pass(hooks.redis, b, after, block_seconds=0)
    assert list(syncs) == ["payments"]  # one sync for five recorded commits
    assert local_sha(b.mirrors, "payments") == newest == hooks.served("payments")
    assert follow_pass(hooks.redis, b, after, block_seconds=0)[1] == {}  # nothing new: nothing synced
