"""A whole `codebot worker` SIGKILLed mid-question: another worker answers once, in bounded time.

Real processes and real signals: the worker's parent is killed (its work horse dies with it),
the question's registry entry stops being renewed, and another worker's reaper retries it.
The heartbeat settings are shortened so the suite stays fast; the bound is the same formula
as in production (heartbeat + grace + reaper interval: 25 s with the defaults, bench/RESULTS.md).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest
from rq.job import Job

from tests.support.e2e import Rig
from tests.support.model_server import Reply, slow, text, tool_calls
from tests.support.worker_procs import (
    SETTLE_SECONDS,
    start_worker,
    stop_worker,
    wait_dead,
    wait_for_horse,
    wait_registered,
)
from worker.jobs.question import Question
from worker.jobs.reaper import abandoned_bound_seconds
from worker.jobs.sink import CONSOLE_STREAM_PREFIX

FAST_HEARTBEATS = {
    "worker_heartbeat_seconds": 1,
    # a live worker on a machine 8x slower beats seconds late: with a 2 s grace the reaper may
    # take it for dead (at load 20 a question here ended in an apology); 10 s keeps the suite fast
    "worker_heartbeat_grace_seconds": 10,
    "reaper_interval_seconds": 0.5,
}
# a running worker answering the retried question (two scripted turns): ~1 s, with room for a busy machine
ANSWER_SECONDS = 15.0


pytestmark = pytest.mark.rig(**FAST_HEARTBEATS)


def hang_first(calls_that_hang: int, answer: str) -> Any:
    """The first N model calls never answer (their worker is killed meanwhile); then a real answer."""

    def handler(body: dict[str, Any]) -> Reply:
        if handler.calls < calls_that_hang:  # type: ignore[attr-defined]
            handler.calls += 1  # type: ignore[attr-defined]
            return slow(120, text("never delivered"))
        if not any(m["role"] == "tool" for m in body["messages"]):
            return tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}))
        return text(f"{answer} [payments:payments/retry.py#L6]")

    handler.calls = 0  # type: ignore[attr-defined]
    return handler


def finals(rig: Rig, question: Question) -> list[tuple[str, dict[str, Any]]]:
    """Every answer or apology ever posted for the question (the whole stream, read again)."""
    events = rig.redis.xrange(CONSOLE_STREAM_PREFIX + question.id)
    kinds = [(raw[b"kind"].decode(), raw) for _id, raw in events]
    return [(kind, raw) for kind, raw in kinds if kind in ("answer", "failed")]


def seconds_to_final(rig: Rig, question: Question, since: float) -> tuple[str, dict[str, Any], float]:
    for kind, fields in rig.events(question, timeout=SETTLE_SECONDS):
        if kind in ("answer", "failed"):
            return kind, fields, time.monotonic() - since
    raise AssertionError("the asker heard nothing: silence")


@pytest.mark.slow
def test_a_worker_killed_mid_question_is_answered_once_by_another_worker_within_the_bound(rig: Rig) -> None:
    rig.model.set_handler(hang_first(1, "answered by the retry"))
    question = rig.question("how does retry work?")
    rig.enqueue(question)
    first = start_worker(rig.settings, "--pool", "fork")
    second = None
    try:
        horse = wait_for_horse(first.pid)
        rig.model.wait_for_requests(1)
        second = start_worker(rig.settings)
        wait_registered(rig.redis, second)  # the bound below is the reaper's, not a start-up's
        killed_at = time.monotonic()
        os.kill(first.pid, signal.SIGKILL)  # the worker itself, not its horse...
        wait_dead(horse, timeout=20)  # ...whose horse dies with it instead of answering as an orphan
        kind, fields, seconds = seconds_to_final(rig, question, killed_at)
        time.sleep(1.0)  # a second answer, if any, would show up now
    finally:
        stop_worker(first)
        if second is not None:
            stop_worker(second)
    assert kind == "answer" and "answered by the retry" in fields["markdown"], fields
    assert len(finals(rig, question)) == 1
    assert any(k == "progress" and "trying again" in f.get("text", "") for k, f in rig.events(question))
    assert seconds < abandoned_bound_seconds(rig.settings) + ANSWER_SECONDS
    job = Job.fetch(question.id, connection=rig.redis)
    assert job.worker_name and f"-{second.pid}-" in job.worker_name  # answered by the other worker


@pytest.mark.slow
def test_a_question_whose_retry_is_killed_too_ends_in_an_apology_within_the_bound(rig: Rig) -> None:
    rig.model.set_handler(hang_first(2, "never"))
    question = rig.question("how does retry work?")
    rig.enqueue(question)
    workers = [start_worker(rig.settings)]
    try:
        rig.model.wait_for_requests(1)
        workers.append(start_worker(rig.settings))
        os.kill(workers[0].pid, signal.SIGKILL)
        rig.model.wait_for_requests(2)  # the retry, on the second worker, hangs too
        workers.append(start_worker(rig.settings))
        wait_registered(rig.redis, workers[-1])  # the bound below is the reaper's, not a start-up's
        killed_at = time.monotonic()
        os.kill(workers[1].pid, signal.SIGKILL)
        kind, fields, seconds = seconds_to_final(rig, question, killed_at)
        time.sleep(1.0)
    finally:
        for worker in workers:
            stop_worker(worker)
    assert (
        kind == "failed"
        and "stopped before it finished" in fields["text"]
        and "Reference: `" in fields["text"]
    )
    assert len(finals(rig, question)) == 1
    assert seconds < abandoned_bound_seconds(rig.settings) + ANSWER_SECONDS


@pytest.mark.slow
def test_a_machine_dying_with_two_questions_in_flight_loses_neither(rig: Rig) -> None:
    rig.model.set_handler(hang_first(2, "answered elsewhere"))
    questions = [rig.question(f"question {n}") for n in range(2)]
    for question in questions:
        rig.enqueue(question)
    machine = start_worker(rig.settings, "--concurrency", "2")
    survivor = None
    try:
        rig.model.wait_for_requests(2)  # both questions are on the dying machine
        survivor = start_worker(rig.settings)
        os.killpg(machine.pid, signal.SIGKILL)  # every process of it: parent, workers, housekeeper
        for question in questions:
            kind, fields = rig.final(list(rig.events(question, timeout=SETTLE_SECONDS)))
            assert kind == "answer" and "answered elsewhere" in fields["markdown"]
        time.sleep(1.0)
    finally:
        stop_worker(machine)
        if survivor is not None:
            stop_worker(survivor)
    assert all(len(finals(rig, question)) == 1 for question in questions)
