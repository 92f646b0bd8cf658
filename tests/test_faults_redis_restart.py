"""Redis gone from under a running Slack adapter and a running `codebot worker`.

Stopped for a while by an operator: the adapter answers "try again" and stays up, the worker
waits and reconnects by itself. Killed: the worker starts the embedded server again by itself
(nobody else touches Redis). Either way every question queued before is answered exactly
once afterwards (the embedded server runs with appendonly + appendfsync everysec;
docs/operations.md, "Many machines").
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from rq.registry import FailedJobRegistry, FinishedJobRegistry

from bot import texts
from bot.slack.format import format_for_slack
from tests.support.metrics import metric_value, samples
from tests.support.model_server import Reply, last_user_text, slow, text, tool_calls
from tests.support.redis_outage import kill_embedded_server
from tests.support.redis_servers import persist_now
from tests.support.slack_rig import SlackRig, wait_until
from tests.support.worker_procs import SETTLE_SECONDS, start_worker, stop_worker, wait_dead
from worker.jobs.feedback import ANSWER_KEY_PREFIX
from worker.jobs.process import make_worker
from worker.jobs.question_log import recent_questions
from worker.jobs.queue import QUESTIONS_QUEUE, queue_depth
from worker.ops.metrics import exposition
from worker.ops.redis_connection import connect, server_pid, stop_embedded_server

TURN_SECONDS = 0.3


pytestmark = pytest.mark.rig("slack", worker_heartbeat_seconds=1, reaper_interval_seconds=0.5)


def answer_slowly(body: dict[str, Any]) -> Reply:
    if not any(m["role"] == "tool" for m in body["messages"]):
        return slow(
            TURN_SECONDS, tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}))
        )
    return slow(TURN_SECONDS, text(f"answer to: {last_user_text(body)} [payments:payments/retry.py#L6]"))


def posts_in_thread(rig: SlackRig, ts: str) -> int:
    return sum(1 for call in rig.api.calls_to("chat.postMessage") if call.body.get("thread_ts") == ts)


def settled(rig: SlackRig, ts: str) -> bool:
    """The thread ended: its one message is the answer (or an apology), with ✅ or ⚠️."""
    return any(r in rig.api.reactions("C1", ts) for r in ("white_check_mark", "warning"))


def ask_while_busy(rig: SlackRig, count: int) -> list[str]:
    """`count` mentions queued, the worker busy with the first one; their message ts."""
    queued = [rig.mention(f"question {n}?", user=f"U{n}") for n in range(count)]
    rig.settle()
    rig.model.wait_for_requests(1)
    return queued


def assert_each_answered_once(rig: SlackRig, queued: list[str]) -> None:
    """One message per thread, never two; the answer, or for the one in flight at the crash at
    worst an apology with a reference."""
    replies = {ts: rig.api.thread_texts("C1", ts) for ts in queued}
    assert all(posts_in_thread(rig, ts) == 1 and len(replies[ts]) == 1 for ts in queued), replies
    answered = [n for n, ts in enumerate(queued) if f"answer to: question {n}?" in replies[ts][0]]
    assert len(answered) >= len(queued) - 1, replies
    assert all("Reference: `" in replies[ts][0] for n, ts in enumerate(queued) if n not in answered)


def redis_down_for_a_while(rig: SlackRig) -> None:
    """Stop Redis; a mention meanwhile gets "try again" and the adapter stays up; restart it."""
    assert stop_embedded_server(rig.settings)
    during = rig.mention("asked while Redis is down", user="U90")
    rig.settle()
    assert rig.api.thread_texts("C1", during) == format_for_slack(texts.QUEUE_UNAVAILABLE)
    health = urllib.request.urlopen(f"http://127.0.0.1:{rig.server.port}/health", timeout=5)
    assert health.status == 200
    time.sleep(2.0)  # down long enough for the worker to notice
    connect(rig.settings)  # the embedded server starts again, with its data


@pytest.mark.slow
def test_redis_restarting_under_the_adapter_and_a_worker_loses_no_queued_question(
    rig: SlackRig, tmp_path: Path
) -> None:
    rig.model.set_handler(answer_slowly)
    worker = start_worker(rig.settings, log=tmp_path / "worker.log")
    try:
        queued = ask_while_busy(rig, 6)
        time.sleep(1.1)  # appendfsync everysec: what was queued is on disk
        redis_down_for_a_while(rig)
        after = rig.mention("asked after the restart", user="U91")
        rig.settle()
        for ts in [*queued, after]:
            wait_until(lambda ts=ts: settled(rig, ts), timeout=SETTLE_SECONDS)
        time.sleep(1.0)  # a duplicate answer, if any, would arrive now
    finally:
        stop_worker(worker)
    assert_each_answered_once(rig, queued)
    [reply] = rig.api.thread_texts("C1", after)
    assert "answer to: asked after the restart" in reply


@pytest.mark.slow
def test_a_worker_starts_a_killed_embedded_redis_again_and_answers_every_queued_question(
    rig: SlackRig, tmp_path: Path
) -> None:
    rig.model.set_handler(answer_slowly)
    worker = start_worker(rig.settings, log=tmp_path / "worker.log")
    try:
        queued = ask_while_busy(rig, 4)
        persist_now(rig.redis)  # what was queued is in the append-only file
        crashed = server_pid(rig.settings)
        assert crashed
        kill_embedded_server(rig.settings)  # and the adapter stays idle: the worker heals it
        wait_dead(crashed)
        for ts in queued:
            wait_until(lambda ts=ts: settled(rig, ts), timeout=SETTLE_SECONDS)
        time.sleep(1.0)  # a duplicate answer, if any, would arrive now
    finally:
        stop_worker(worker)
    assert server_pid(rig.settings) != crashed
    assert_each_answered_once(rig, queued)


def stop_redis_once_the_answer_is_delivered(
    rig: SlackRig, caplog: pytest.LogCaptureFixture
) -> threading.Thread:
    """Slack holds the answer's ✅ (the delivery's last call); meanwhile Redis goes away (an
    operator's stop: nothing starts it again by itself); once Slack took the ✅ and the worker
    met the missing Redis at the job's end, Redis is started again, with its data."""
    released = threading.Event()
    rig.api.hang("reactions.add", 30.0, "white_check_mark", until=released)

    def stop_then_start_again() -> None:
        wait_until(lambda: rig.api.held, timeout=60)
        assert stop_embedded_server(rig.settings)
        released.set()
        # the worker met the missing Redis at the job's end: it holds on (or says what it lost)
        met = ("holding on to it until Redis is back", "could not record the question's")
        wait_until(lambda: any(line in caplog.text for line in met), timeout=60)
        connect(rig.settings)  # the embedded server starts again, with its data

    helper = threading.Thread(target=stop_then_start_again, daemon=True)
    helper.start()
    return helper


def test_a_question_ending_as_redis_goes_away_keeps_its_record_metrics_and_feedback_context(
    rig: SlackRig, caplog: pytest.LogCaptureFixture
) -> None:
    """The asker had their one answer, but the job ended in RQ's failed registry and its record
    (the console's), metrics and 👍/👎 context were lost. The job's end now waits Redis out
    as its start does."""
    caplog.set_level(logging.INFO)
    rig.model.set_handler(answer_slowly)
    ts = rig.mention("how does retry work?")
    rig.settle()
    [job_id] = rig.question_jobs()
    helper = stop_redis_once_the_answer_is_delivered(rig, caplog)
    make_worker(rig.runtime, name="ending", seats=1).work(burst=True, logging_level="WARNING")
    helper.join(timeout=60)
    redis = connect(rig.settings)
    [reply] = rig.api.thread_texts("C1", ts)  # one answer
    assert reply.startswith("answer to: how does retry work?")
    assert FinishedJobRegistry(QUESTIONS_QUEUE, connection=redis).get_job_ids() == [job_id]
    assert FailedJobRegistry(QUESTIONS_QUEUE, connection=redis).get_job_ids() == []
    assert [record["id"] for record in recent_questions(redis)] == [job_id]
    found = samples(exposition(redis, queue_depth).decode())
    assert metric_value(found, 'codebot_questions_total{platform="slack",status="answered"}') == 1
    assert redis.hget(ANSWER_KEY_PREFIX + job_id, "ref") is not None  # what a 👍/👎 is filed with
