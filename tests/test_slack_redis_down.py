"""Redis stopped while a mention arrives: the asker is told, the adapter stays up and recovers."""

from __future__ import annotations

import urllib.request

import pytest

from bot import texts
from bot.slack_format import format_for_slack
from tests.support.redis_outage import is_reachable, kill_embedded_server
from tests.support.slack_api import BOT_USER_ID, message
from tests.support.slack_rig import SlackRig, wait_until
from worker.ops.redis_connection import connect

pytestmark = pytest.mark.rig("slack")


def test_a_mention_while_redis_is_down_is_answered_with_try_again_and_the_adapter_recovers(
    rig: SlackRig,
) -> None:
    kill_embedded_server(rig.settings)
    wait_until(lambda: not is_reachable(rig.redis))
    ts = rig.mention("how does retry work?")
    rig.send(message("C1", ts, f"<@{BOT_USER_ID}> how does retry work?"))  # same message again
    rig.settle()
    assert rig.api.thread_texts("C1", ts) == format_for_slack(texts.QUEUE_UNAVAILABLE)  # told once
    health = urllib.request.urlopen(f"http://127.0.0.1:{rig.server.port}/health", timeout=5)
    assert health.status == 200  # the adapter is still up

    connect(rig.settings)  # Redis is back (the embedded server restarts)
    later = rig.mention("how does retry work, now?")
    rig.settle()
    assert rig.question_jobs() == [f"q-slack-C1-{later.replace('.', '_')}"]
    assert rig.api.thread_texts("C1", later) == []  # no error reply this time


@pytest.mark.slow
def test_a_hung_redis_is_answered_with_try_again_within_bounded_time_and_the_adapter_recovers(
    rig: SlackRig,
) -> None:
    import os
    import signal
    import time

    from worker.ops.redis_connection import SOCKET_TIMEOUT_SECONDS, server_pid

    pid = server_pid(rig.settings)
    assert pid
    os.kill(pid, signal.SIGSTOP)  # accepts connections, never answers
    try:
        started = time.monotonic()
        ts = rig.mention("how does retry work?")  # acked at once: Slack never retries it
        assert time.monotonic() - started < 1.0
        wait_until(lambda: rig.api.thread_texts("C1", ts), timeout=3 * SOCKET_TIMEOUT_SECONDS)
        assert rig.api.thread_texts("C1", ts) == format_for_slack(texts.QUEUE_UNAVAILABLE)
    finally:
        os.kill(pid, signal.SIGCONT)
    rig.settle()
    later = rig.mention("and now?")
    rig.settle()
    assert any(job.endswith(later.replace(".", "_")) for job in rig.question_jobs())
