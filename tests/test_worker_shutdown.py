"""Deploys: SIGTERM to every process of a `codebot worker` (systemd's default KillMode=control-group)
lets the question being answered finish, once, without spending its retry."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from rq import Queue, Worker
from rq.worker.base import BaseWorker

from tests.support.model_server import Reply, last_user_text, slow, text, tool_calls
from tests.support.slack_rig import SlackRig, wait_until
from tests.support.worker_procs import session_pids, start_worker, stop_worker, wait_for_horse
from worker.jobs.console import ConsoleWorker
from worker.jobs.process import make_worker, start_housekeeper
from worker.jobs.queue import QUESTIONS_QUEUE
from worker.ops.redis_connection import connect

TURN_SECONDS = 1.5  # long enough for the signals to land mid-question


pytestmark = pytest.mark.rig("slack")


def answer_slowly(body: dict[str, Any]) -> Reply:
    if not any(m["role"] == "tool" for m in body["messages"]):
        return slow(
            TURN_SECONDS, tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}))
        )
    return slow(TURN_SECONDS, text(f"answer to: {last_user_text(body)} [payments:payments/retry.py#L6]"))


@pytest.mark.parametrize(
    ("concurrency", "pool", "rq_workers"), [(1, "fork", 1), (2, "fork", 2), (2, "threads", 1)]
)
def test_sigterm_to_every_process_of_a_worker_lets_the_running_question_finish_once(
    rig: SlackRig, tmp_path: Path, concurrency: int, pool: str, rq_workers: int
) -> None:
    rig.model.set_handler(answer_slowly)
    args = ("--concurrency", str(concurrency), "--pool", pool)
    worker = start_worker(rig.settings, *args, log=tmp_path / "worker.log")
    try:
        ts = rig.mention("how does retry work?")
        rig.settle()
        # mid-question (generous bounds: a worker starts slowly on a machine busy with other work)
        rig.model.wait_for_requests(1, timeout=120)
        horse = wait_for_horse(worker.pid) if pool == "fork" else worker.pid
        # every RQ worker up (a stop signal during a worker's start-up is not what this tests)
        wait_until(lambda: len(Worker.all(connection=rig.redis)) == rq_workers, timeout=60)
        everyone = session_pids(worker.pid)
        assert horse in everyone and worker.pid in everyone
        for pid in everyone:  # as systemd does: the parent, its workers, housekeeper and horses
            with suppress(ProcessLookupError):  # a git or rg the horse ran may have ended since
                os.kill(pid, signal.SIGTERM)
        try:
            exit_code = worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("the worker did not stop:\n" + (tmp_path / "worker.log").read_text()[-6000:])
    finally:
        stop_worker(worker)
    log = (tmp_path / "worker.log").read_text()[-3000:]
    assert exit_code == 0, log  # a warm shutdown: it waited for the question
    [reply] = rig.api.thread_texts("C1", ts)
    assert reply.startswith("answer to: how does retry work?"), log
    assert len(rig.model.requests) == 2, log  # one run: no retry was spent
    updates = [c.body.get("text", "") for c in rig.api.calls_to("chat.update")]
    assert not any("trying again" in str(update) for update in updates)
    wait_until(lambda: "white_check_mark" in rig.api.reactions("C1", ts))


def test_a_burst_of_stop_signals_stops_the_housekeeper(rig: SlackRig) -> None:
    """systemd's SIGTERM and the one `codebot worker` forwards reach the housekeeper together; a
    handler that waited for a lock the interrupted code held hung it, and the worker with it."""
    housekeeper = start_housekeeper(rig.runtime)
    try:
        assert housekeeper.pid is not None
        # its four pass threads running: the main thread is in its waiting loop
        wait_until(lambda: len(list(Path(f"/proc/{housekeeper.pid}/task").iterdir())) >= 5)
        deadline = time.monotonic() + 30
        while housekeeper.is_alive() and time.monotonic() < deadline:
            os.kill(housekeeper.pid, signal.SIGTERM)  # again and again, until it has stopped
        housekeeper.join(timeout=1)
        assert housekeeper.exitcode == 0  # stopped, of the signals, cleanly
    finally:
        if housekeeper.is_alive():
            housekeeper.kill()
            housekeeper.join(5)


def worker_of_kind(rig: SlackRig, kind: str) -> BaseWorker:
    """A worker as each pool makes it, or as `codebot ask` does when no worker runs."""
    if kind == "ask":
        redis = connect(rig.settings)
        return ConsoleWorker([Queue(QUESTIONS_QUEUE, connection=redis)], connection=redis)
    return make_worker(rig.runtime, name="stopping", seats=None if kind == "fork" else 2)


@pytest.mark.parametrize("kind", ["fork", "threads", "ask"])
def test_a_stopping_worker_never_waits_out_a_read_of_its_command_channel(rig: SlackRig, kind: str) -> None:
    """A worker exited ~60 s after its last question now and then: the reader of its `rq` command
    channel read the reply to UNSUBSCRIBE before it was told to stop, went round once more and
    waited (up to 60 s) for a subscription. Here the reply is always read first, as on a busy
    machine; the reader must end without starting that wait."""
    worker = worker_of_kind(rig, kind)
    worker.subscribe()
    pubsub, reader = worker.pubsub, worker.pubsub_thread
    assert pubsub is not None and isinstance(reader, threading.Thread)
    read, unsubscribe = pubsub.get_message, pubsub.unsubscribe
    waits_for_a_subscription: list[float | None] = []
    went_round = threading.Event()

    def get_message(**kwargs: Any) -> Any:
        if not pubsub.subscribed:  # redis-py would now wait `timeout` for a subscription
            waits_for_a_subscription.append(kwargs.get("timeout"))
            went_round.set()
            return None
        return read(**kwargs)

    def unsubscribe_then_let_the_reader_go_first(*args: Any) -> Any:
        sent = unsubscribe(*args)
        wait_until(lambda: not pubsub.subscribed)  # the reader has read the reply
        wait_until(lambda: went_round.is_set() or not reader.is_alive())
        return sent

    pubsub.get_message = get_message
    pubsub.unsubscribe = unsubscribe_then_let_the_reader_go_first
    worker.teardown()
    reader.join(timeout=30)
    assert not reader.is_alive()
    assert waits_for_a_subscription == []
