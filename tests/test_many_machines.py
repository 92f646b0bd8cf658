"""Two worker machines (two data dirs, their own mirrors) sharing one Redis: one commit per repo.

Machine A is the rig's data dir and serves the Redis; machine B has a data dir of its own and
reaches that Redis through REDIS_URL, as a second host would. Workers are real `codebot
worker` processes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from codebot.wiring import build_runtime
from config.settings import Settings, load_settings
from tests.support.e2e import Rig
from tests.support.fixture_repos import make_repo
from tests.support.git_remote import silent_server
from tests.support.model_server import Reply, text, tool_calls
from tests.support.slack_rig import wait_until
from tests.support.worker_procs import start_worker, stop_worker
from worker.jobs.admin import enqueue_refresh
from worker.jobs.question import ReplyTarget
from worker.jobs.runtime import Runtime
from worker.ops.redis_connection import socket_path
from worker.repos.refresh import (
    catch_up,
    claim_due_refreshes,
    local_sha,
    period_offset_seconds,
    record_refresh,
    run_due_refreshes,
    wanted_sha,
)

CITE = "It tries MAX_ATTEMPTS times [payments:payments/retry.py#L3]."


pytestmark = pytest.mark.rig(refresh_check_seconds=0.5, catch_up_timeout_seconds=2.0)


def machine_b(rig: Rig, tmp_path: Path, repos_file: Path | None = None) -> Runtime:
    """Another host: its own data dir, the same Redis (REDIS_URL), optionally another repos file."""
    options: dict[str, Any] = {
        **rig.settings.model_dump(exclude={"redis_url", "data_dir", "repos_file"}),
        "redis_url": f"unix://{socket_path(rig.settings)}",
        "data_dir": tmp_path / "machine-b",
        "repos_file": repos_file or rig.settings.repos_file,
    }
    return build_runtime(load_settings(env_file=None, **options))


def answer_citing_line_3(body: dict[str, Any]) -> Reply:
    if body["messages"][-1]["role"] == "tool":
        return text(CITE)
    return tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}))


def new_commit(rig: Rig, tmp_path: Path) -> str:
    return make_repo(tmp_path / "payments-src", {"CHANGELOG.md": f"v{time.time()}\n"})


def seconds_in_job(rig: Rig, question_id: str) -> float:
    """From 👀 to the answer, by the Redis stream ids of the console sink (milliseconds)."""
    entries = rig.redis.xrange(f"codebot:console:{question_id}")
    first, last = (int(entry_id.split(b"-")[0]) for entry_id in (entries[0][0], entries[-1][0]))
    return (last - first) / 1000


def burst(settings: Settings) -> None:
    worker = start_worker(settings, "--burst")
    try:
        assert worker.wait(timeout=60) == 0
    finally:
        stop_worker(worker)


def test_an_admin_refresh_on_one_machine_reaches_a_question_answered_on_the_other(
    rig: Rig, tmp_path: Path
) -> None:
    b = machine_b(rig, tmp_path)
    assert b.mirrors.sync("payments").sha == rig.sha
    newer = new_commit(rig, tmp_path)
    enqueue_refresh(rig.redis, ["payments"], ReplyTarget(platform="console", channel="admin"), "admin")
    burst(rig.settings)  # machine A takes the admin job: fetches, records the commit in Redis
    assert wanted_sha(rig.redis, "payments") == newer
    rig.model.set_handler(answer_citing_line_3)
    question = rig.question("how many attempts?")
    rig.enqueue(question)
    burst(b.settings)  # machine B answers: it catches up before answering
    kind, answer = rig.final(rig.events(question))
    assert kind == "answer" and f"blob/{newer}/payments/retry.py#L3" in answer["markdown"]
    assert any("updating payments" in f.get("text", "") for k, f in rig.events(question) if k == "progress")
    assert local_sha(b.mirrors, "payments") == newer


def test_a_worker_machine_catches_up_in_the_background_without_a_question(rig: Rig, tmp_path: Path) -> None:
    b = machine_b(rig, tmp_path)
    b.mirrors.sync("payments")
    worker = start_worker(b.settings)  # not burst: its housekeeper runs
    try:
        newer = new_commit(rig, tmp_path)
        record_refresh(rig.redis, rig.runtime.mirrors, rig.runtime.mirrors.sync("payments"), "host-a")
        wait_until(lambda: local_sha(b.mirrors, "payments") == newer, timeout=15)
    finally:
        stop_worker(worker)


def test_a_scheduled_refresh_is_fetched_by_one_machine_per_period_and_followed_by_the_others(
    rig: Rig, tmp_path: Path
) -> None:
    scheduled = tmp_path / "scheduled.toml"
    scheduled.write_text(rig.settings.repos_file.read_text() + "refresh_minutes = 5\n")
    a, b = machine_b(rig, tmp_path / "a", scheduled), machine_b(rig, tmp_path / "b", scheduled)
    period, offset = 5 * 60, period_offset_seconds("payments", 5 * 60)
    now = (time.time() + offset) // period * period - offset + 1  # early in this repo's current period
    assert sorted(
        [claim_due_refreshes(rig.redis, a.mirrors, now), claim_due_refreshes(rig.redis, b.mirrors, now)]
    ) == [
        [],
        ["payments"],
    ]  # one machine per period...
    assert claim_due_refreshes(rig.redis, a.mirrors, now + period - 2) == []  # ...once per period
    newer = new_commit(rig, tmp_path)
    (result,) = run_due_refreshes(rig.redis, b.mirrors, now + period)  # the next period
    assert result.sha == newer == wanted_sha(rig.redis, "payments")
    catch_up(a.mirrors, rig.redis, ["payments"])  # the other machine follows (here: its first clone)
    assert local_sha(a.mirrors, "payments") == newer


def test_the_housekeeper_runs_a_due_scheduled_refresh_at_start(rig: Rig, tmp_path: Path) -> None:
    scheduled = tmp_path / "scheduled.toml"
    scheduled.write_text(rig.settings.repos_file.read_text() + "refresh_minutes = 60\n")
    b = machine_b(rig, tmp_path, scheduled)
    worker = start_worker(b.settings)  # a machine with no mirror yet: the schedule clones it
    try:
        wait_until(lambda: wanted_sha(rig.redis, "payments") == rig.sha, timeout=15)
        assert local_sha(b.mirrors, "payments") == rig.sha
    finally:
        stop_worker(worker)


@pytest.mark.slow
def test_a_machine_that_cannot_fetch_answers_from_its_last_good_snapshot_within_the_catch_up_bound(
    rig: Rig, tmp_path: Path
) -> None:
    b = machine_b(rig, tmp_path)
    b.mirrors.sync("payments")
    rig.redis.hset("codebot:repo:payments", "sha", "f" * 40)  # wanted: a commit B cannot fetch
    rig.model.set_handler(answer_citing_line_3)
    with silent_server() as hung_url:
        hung = tmp_path / "hung.toml"
        hung.write_text(
            f'[[repo]]\nname = "payments"\nurl = "{hung_url}"\nweb_url = "https://github.com/acme/payments"\n'
        )
        b_hung = machine_b(rig, tmp_path, hung)
        seconds = []
        for n in range(2):
            question = rig.question(f"question {n}")
            rig.enqueue(question)
            burst(b_hung.settings)
            kind, answer = rig.final(rig.events(question))
            assert kind == "answer" and f"blob/{rig.sha}/payments/retry.py#L3" in answer["markdown"]
            seconds.append(seconds_in_job(rig, question.id))
    bound = rig.settings.catch_up_timeout_seconds
    assert bound <= seconds[0] < 2 * bound + 10  # waited for git (ls-remote), about its bound
    assert seconds[1] < seconds[0] - bound / 2  # and the next question does not wait for git again
