"""A Redis stall past the client's read timeout: no claim answers "taken" to the one who took it.

redis-py retries a command that timed out once, on a new connection; when the stalled Redis
resumes it runs both, the first try first (it waited on an open connection), and a plain
`SET NX` answered the retry "already taken": mentions were dropped without a trace and
finished answers never posted (issue 11). Each test stalls the real embedded server with
SIGSTOP past the client's read timeout (tests/support/redis_stall.py) just as a claim is made,
on a connection that served before (as in any process that has been up a while), and ends
with exactly one answer. A worker's read timeout is RQ's (its dequeue wait + 10 s), not the
adapters' 10 s: the worker's test shortens it through `worker_maintenance_interval_seconds`.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from rq import Queue
from rq.registry import StartedJobRegistry

from bot.slack.stream import SlackStreamSink
from config.settings import Settings
from tests.support.discord_rig import DiscordRig
from tests.support.e2e import Rig
from tests.support.model_server import Reply, text, tool_calls
from tests.support.redis_stall import STALL_PAST_ONE_TIMEOUT, stall, stalled
from tests.support.slack_api import mention
from tests.support.slack_rig import SlackRig, wait_until
from tests.support.worker_procs import start_worker, stop_worker
from worker.jobs.question import Question, ReplyTarget, event_identity
from worker.jobs.queue import QUESTIONS_QUEUE
from worker.jobs.reaper import Reachability, make_codebot_worker, reap_abandoned
from worker.ops.claims import claim
from worker.ops.redis_connection import connect

READ_RETRY = ("read_file", {"repo": "payments", "path": "payments/retry.py", "start_line": 1, "end_line": 13})
ANSWER = "It retries 5 times [payments:payments/retry.py#L3]."

pytestmark = pytest.mark.slow


def test_a_claim_asked_again_after_a_stall_is_still_its_takers(rig: Rig) -> None:
    key = "codebot:test:claim"
    with stalled(rig.settings, STALL_PAST_ONE_TIMEOUT):
        assert claim(rig.redis, key, "mine", 60)  # the first try timed out; Redis ran it, then the retry
    assert not claim(rig.redis, key, "someone else's", 60)
    assert claim(rig.redis, key, "mine", 60)


@pytest.mark.rig("slack")
def test_a_slack_mention_during_a_stall_is_queued_and_answered_once(rig: SlackRig) -> None:
    rig.model.enqueue(tool_calls(READ_RETRY), text(ANSWER))
    rig.redis.ping()  # the adapter's connection has served before
    with stalled(rig.settings, STALL_PAST_ONE_TIMEOUT) as resumed:
        ts = rig.mention("how many times does retry try?")  # acked at once; the listener waits on Redis
        resumed.join()
    rig.settle()
    rig.send(mention("C1", ts, "how many times does retry try?"))  # Slack's retry of the event
    rig.settle()
    assert rig.question_jobs() == [event_identity("slack", "C1", ts)]
    rig.work()
    (reply,) = rig.api.thread_texts("C1", ts)
    assert "retries 5 times" in reply and rig.api.reactions("C1", ts) == ["white_check_mark"]


def test_a_discord_mention_during_a_stall_is_queued_and_answered_once(drig: DiscordRig) -> None:
    drig.script_answer(ANSWER)
    drig.bot.client.redis.get().ping()  # the adapter's connection has served before
    with stalled(drig.settings, STALL_PAST_ONE_TIMEOUT) as resumed:
        asked = drig.mention("how many times does retry try?")
        resumed.join()
    drig.acked(asked)  # 👀 from the adapter: enqueued
    drig.work()
    posted = drig.fake.posted(asked["id"])  # the answer thread, opened from the question
    assert next(m["content"] for m in posted).startswith("It retries 5 times")
    assert len(posted) == 1 and ("PUT", "✅") in drig.reactions(asked["id"])


def worker_read_timeout(settings: Settings) -> float:
    """The read timeout RQ gives a `codebot worker`'s connection (its dequeue wait + 10 s)."""
    return float(make_codebot_worker(settings, [], connect(settings)).connection_timeout)


@pytest.mark.rig("slack", worker_maintenance_interval_seconds=1, worker_heartbeat_grace_seconds=60)
def test_an_answer_finished_during_a_stall_is_posted_once(rig: SlackRig, tmp_path: Path) -> None:
    ts = rig.mention("how many times does retry try?")
    rig.settle()
    seconds = worker_read_timeout(rig.settings) + 3.5
    stalls: list[threading.Timer] = []

    def handler(body: dict[str, Any]) -> Reply:
        if not any(m["role"] == "tool" for m in body["messages"]):
            return tool_calls(READ_RETRY)
        stalls.append(stall(rig.settings, seconds))  # Redis stops as the worker stores the answer
        return text(ANSWER)

    rig.model.set_handler(handler)
    worker = start_worker(rig.settings, "--burst", log=tmp_path / "worker.log")
    try:
        worker.wait(timeout=120)
    finally:
        for timer in stalls:
            timer.join()
        stop_worker(worker)
    assert len(stalls) == 1 and Queue(QUESTIONS_QUEUE, connection=rig.redis).count == 0
    (reply,) = rig.api.thread_texts("C1", ts)
    assert "retries 5 times" in reply and rig.api.reactions("C1", ts) == ["white_check_mark"]


@pytest.mark.rig("slack", slack_streaming=True)
def test_a_slack_stream_recorded_during_a_stall_stays_the_questions_message(rig: SlackRig) -> None:
    target = ReplyTarget(platform="slack", channel="C1", thread="1.0", message="1.0", team="T0001")
    question = Question(id="slack-C1-1_0", asker="U1", target=target, text="q", repos=["payments"])
    sink = SlackStreamSink(rig.settings, rig.redis, question)
    rig.redis.ping()  # the connection has served before, as in a worker that has been up a while
    with stalled(rig.settings, STALL_PAST_ONE_TIMEOUT):
        assert sink.claim_stream("1.5")  # the first try timed out; Redis ran it, then the retry
    assert sink.claim_stream("1.5")  # still its own: the stream is kept, not deleted
    other_run = SlackStreamSink(rig.settings, rig.redis, question)
    assert not other_run.claim_stream("1.7")  # a second run's stream loses to the first


def running(rig: Rig, question_id: str, expires_in: float) -> str:
    """Register the question as started by a worker whose entry expires in `expires_in` s."""
    queue = Queue(QUESTIONS_QUEUE, connection=rig.redis)
    job, _ = Queue.dequeue_any([queue], None, connection=rig.redis)  # type: ignore[misc]
    assert job.id == question_id
    entry = f"{job.id}:worker-{question_id}"
    rig.redis.zadd(StartedJobRegistry(queue=queue).key, {entry: time.time() + expires_in})
    return entry


def test_questions_whose_heartbeats_lapsed_during_a_stall_are_reaped_only_if_not_renewed_after_it(
    rig: Rig,
) -> None:
    live, dead = rig.question("live"), rig.question("dead")
    rig.enqueue(live)
    rig.enqueue(dead)
    live_entry, _ = running(rig, live.id, expires_in=2), running(rig, dead.id, expires_in=2)
    reachability = Reachability(settle_seconds=3)  # the housekeeper's: a heartbeat TTL
    reachability.reachable_since -= 3  # up long enough before the stall
    with stalled(rig.settings, STALL_PAST_ONE_TIMEOUT) as resumed:
        # the reaper's call waits out the stall; both entries expire meanwhile
        assert reap_abandoned(rig.redis, [QUESTIONS_QUEUE], reachability) == []
        resumed.join()
    assert reap_abandoned(rig.redis, [QUESTIONS_QUEUE], reachability) == []  # Redis just came back
    key = StartedJobRegistry(QUESTIONS_QUEUE, connection=rig.redis).key
    rig.redis.zadd(key, {live_entry: time.time() + 3})  # the live worker renews within its heartbeat
    wait_until(reachability.settled, timeout=30)
    assert reap_abandoned(rig.redis, [QUESTIONS_QUEUE], reachability) == [dead.id]
    assert Queue(QUESTIONS_QUEUE, connection=rig.redis).job_ids == [dead.id]  # retried; live runs on
