"""`codebot worker --pool threads` (the default): many questions in one RQ worker process, with
RQ's registries, commands and the reaper's recovery as a forking worker has them."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest
from rq import Queue, Worker
from rq.command import send_stop_job_command
from rq.job import Job, JobStatus
from rq.registry import FinishedJobRegistry, StartedJobRegistry

from tests.support.e2e import Rig
from tests.support.model_server import Reply, last_user_text, slow, text, tool_calls
from tests.support.worker_procs import SETTLE_SECONDS, horse_pids, start_worker, stop_worker, wait_registered
from worker.jobs.process import seats_per_process
from worker.jobs.question_start import make_model_client
from worker.jobs.queue import QUESTIONS_QUEUE
from worker.jobs.sink import CONSOLE_STREAM_PREFIX

# a 10 s grace: a live worker on a machine 8x slower beats seconds late, and with 2 s the reaper
# may take it for dead
pytestmark = pytest.mark.rig(
    worker_heartbeat_seconds=1, worker_heartbeat_grace_seconds=10, reaper_interval_seconds=0.5
)


def two_slow_turns(seconds: float) -> Any:
    def handler(body: dict[str, Any]) -> Reply:
        if not any(m["role"] == "tool" for m in body["messages"]):
            return slow(seconds, tool_calls(("list_repos", {})))
        return slow(seconds, text(f"answer to {last_user_text(body)}"))

    return handler


def wait_for(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def finals(rig: Rig, question_id: str) -> list[str]:
    events = rig.redis.xrange(CONSOLE_STREAM_PREFIX + question_id)
    return [raw[b"kind"].decode() for _id, raw in events if raw[b"kind"] in (b"answer", b"failed")]


def held_first_turns(released: threading.Event) -> Any:
    """Every first turn is held until `released` (at most 60 s, a hang guard), then answered."""

    def handler(body: dict[str, Any]) -> Reply:
        if not any(m["role"] == "tool" for m in body["messages"]):
            released.wait(60)
            return tool_calls(("list_repos", {}))
        return text(f"answer to {last_user_text(body)}")

    return handler


def test_one_process_holds_three_questions_and_rq_registries_show_each(rig: Rig) -> None:
    looked = threading.Event()  # the three stay in flight until the registries were read
    rig.model.set_handler(held_first_turns(looked))
    questions = [rig.question(f"question {i}") for i in range(3)]
    for question in questions:
        rig.enqueue(question)
    worker = start_worker(rig.settings, "--burst", "--concurrency", "3")
    queue = Queue(QUESTIONS_QUEUE, connection=rig.redis)
    try:
        rig.model.wait_for_requests(3)  # all three first turns at once
        assert len(StartedJobRegistry(queue=queue).get_job_ids()) == 3
        [rq_worker] = Worker.all(connection=rig.redis)  # one RQ worker, as `rq info` lists it
        assert rq_worker.pid == worker.pid and rq_worker.get_state() == "busy"
        assert horse_pids(worker.pid) == []  # no process forked per question
        looked.set()
        assert worker.wait(timeout=60) == 0
    finally:
        looked.set()
        stop_worker(worker)
    for question in questions:
        kind, fields = rig.final(rig.events(question))
        assert kind == "answer" and question.text in fields["markdown"]
    assert sorted(FinishedJobRegistry(queue=queue).get_job_ids()) == sorted(q.id for q in questions)


@pytest.mark.slow
def test_a_threaded_worker_killed_with_two_questions_in_flight_has_both_answered_once_elsewhere(
    rig: Rig,
) -> None:
    calls = {"n": 0}

    def handler(body: dict[str, Any]) -> Reply:
        calls["n"] += 1
        if calls["n"] <= 2:
            return slow(120, text("never delivered"))  # the dying process's two first turns
        if body["messages"][-1].get("role") != "tool":
            return tool_calls(("list_repos", {}))  # an answer needs code read
        return text(f"answered elsewhere: {last_user_text(body)}")

    rig.model.set_handler(handler)
    questions = [rig.question(f"question {i}") for i in range(2)]
    for question in questions:
        rig.enqueue(question)
    first = start_worker(rig.settings, "--concurrency", "2")
    second = None
    try:
        rig.model.wait_for_requests(2)
        second = start_worker(rig.settings)
        wait_registered(rig.redis, second)  # up before the kill: the wait below is the reaper's
        os.kill(first.pid, signal.SIGKILL)  # the process and every question in it
        for question in questions:
            kind, fields = rig.final(list(rig.events(question, timeout=SETTLE_SECONDS)))
            assert kind == "answer" and "answered elsewhere" in fields["markdown"]
        time.sleep(1.0)  # a second answer, if any, would show up now
    finally:
        stop_worker(first)
        if second is not None:
            stop_worker(second)
    for question in questions:
        assert finals(rig, question.id) == ["answer"]
        assert f"-{second.pid}-" in (Job.fetch(question.id, connection=rig.redis).worker_name or "")


def test_rq_stop_job_stops_one_question_while_the_other_in_the_process_is_answered(rig: Rig) -> None:
    def handler(body: dict[str, Any]) -> Reply:
        if "stop me" in last_user_text(body):
            return slow(0.3, tool_calls(("list_repos", {})))  # loops on tools until stopped
        return two_slow_turns(1.0)(body)

    rig.model.set_handler(handler)
    stopped, kept = rig.question("stop me"), rig.question("keep me")
    rig.enqueue(stopped)
    rig.enqueue(kept)
    worker = start_worker(rig.settings, "--burst", "--concurrency", "2")
    try:
        rig.model.wait_for_requests(2)
        send_stop_job_command(rig.redis, stopped.id)
        assert worker.wait(timeout=60) == 0
    finally:
        stop_worker(worker)
    assert Job.fetch(stopped.id, connection=rig.redis).get_status() == JobStatus.STOPPED
    kind, fields = rig.final(rig.events(stopped))  # told once, not "trying again" for nothing
    assert kind == "failed" and "stopped before it finished" in fields["text"]
    kind, fields = rig.final(rig.events(kept))
    assert kind == "answer" and "keep me" in fields["markdown"]


def test_questions_are_spread_evenly_over_the_processes_and_none_is_left_empty() -> None:
    assert seats_per_process(32, 1) == [32]
    assert seats_per_process(10, 4) == [3, 3, 2, 2]
    assert seats_per_process(2, 5) == [1, 1]


def test_the_model_client_is_built_once_per_process_and_never_shared_across_a_fork(rig: Rig) -> None:
    first = make_model_client(rig.runtime)
    assert make_model_client(rig.runtime) is first  # every question of this process shares it
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # a forked horse must build its own: a client's sockets cannot cross a fork
        os.write(write, b"new" if make_model_client(rig.runtime) is not first else b"shared")
        os._exit(0)
    os.waitpid(child, 0)
    assert os.read(read, 10) == b"new"
