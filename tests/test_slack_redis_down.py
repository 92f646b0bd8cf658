"""Redis in trouble while a mention arrives: the asker is told which trouble, the adapter stays up.

Stopped by an operator (`codebot redis stop`): "try again"; killed: the adapter's next call
starts the embedded server again and the mention is queued; hung: "try again" within bounded
time; refusing writes (a full disk): told so, not "unreachable".
"""

from __future__ import annotations

import os
import signal
import urllib.request

import pytest

from bot import texts
from bot.slack.format import format_for_slack
from tests.support.redis_outage import kill_embedded_server
from tests.support.redis_servers import persist_now
from tests.support.slack_api import BOT_USER_ID, message
from tests.support.slack_rig import SlackRig, wait_until
from tests.support.worker_procs import wait_dead
from worker.ops.redis_connection import (
    SOCKET_TIMEOUT_SECONDS,
    connect,
    server_pid,
    stop_embedded_server,
)

pytestmark = pytest.mark.rig("slack")


def job_of(ts: str) -> str:
    return f"q-slack-C1-{ts.replace('.', '_')}"


def test_a_mention_while_redis_is_stopped_is_answered_with_try_again_and_the_adapter_recovers(
    rig: SlackRig,
) -> None:
    assert stop_embedded_server(rig.settings)  # an operator's stop: the adapter does not undo it
    ts = rig.mention("how does retry work?")
    rig.send(message("C1", ts, f"<@{BOT_USER_ID}> how does retry work?"))  # same message again
    rig.settle()
    assert rig.api.thread_texts("C1", ts) == format_for_slack(texts.QUEUE_UNAVAILABLE)  # told once
    health = urllib.request.urlopen(f"http://127.0.0.1:{rig.server.port}/health", timeout=5)
    assert health.status == 200  # the adapter is still up

    connect(rig.settings)  # Redis is back (any codebot command starts the embedded server)
    later = rig.mention("how does retry work, now?")
    rig.settle()
    assert rig.question_jobs() == [job_of(later)]
    assert rig.api.thread_texts("C1", later) == []  # no error reply this time


def test_a_killed_embedded_redis_is_started_again_by_the_adapter_and_the_mention_is_queued(
    rig: SlackRig,
) -> None:
    before = rig.mention("queued before the crash")
    rig.settle()
    persist_now(rig.redis)  # what was queued is in the append-only file
    crashed = server_pid(rig.settings)
    assert crashed
    kill_embedded_server(rig.settings)
    wait_dead(crashed)
    after = rig.mention("asked after the crash")
    rig.settle()
    assert rig.question_jobs() == [job_of(before), job_of(after)]  # nothing lost, nobody refused
    assert rig.api.thread_texts("C1", after) == []
    assert server_pid(rig.settings) != crashed


def test_a_mention_while_redis_refuses_writes_is_told_so_not_that_redis_is_unreachable(
    rig: SlackRig,
) -> None:
    rig.redis.config_set("maxmemory", "1")  # every write now fails: OOM command not allowed
    try:
        ts = rig.mention("how does retry work?")
        rig.settle()
    finally:
        rig.redis.config_set("maxmemory", "0")
    assert rig.api.thread_texts("C1", ts) == format_for_slack(texts.QUEUE_REFUSES_WRITES)


@pytest.mark.slow
def test_a_hung_redis_is_answered_with_try_again_within_bounded_time_and_the_adapter_recovers(
    rig: SlackRig,
) -> None:
    pid = server_pid(rig.settings)
    assert pid
    os.kill(pid, signal.SIGSTOP)  # accepts connections, never answers
    try:
        ts = rig.mention("how does retry work?")  # acked before the listener ran: Slack never retries it
        assert rig.api.thread_texts("C1", ts) == []  # the ack came first: the reply is still to come
        wait_until(lambda: rig.api.thread_texts("C1", ts), timeout=3 * SOCKET_TIMEOUT_SECONDS)
        assert rig.api.thread_texts("C1", ts) == format_for_slack(texts.QUEUE_UNAVAILABLE)
    finally:
        os.kill(pid, signal.SIGCONT)
    rig.settle()
    later = rig.mention("and now?")
    rig.settle()
    assert job_of(later) in rig.question_jobs()
    assert server_pid(rig.settings) == pid  # a hung server is waited out, never replaced
