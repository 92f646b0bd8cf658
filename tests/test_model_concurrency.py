"""A slow or hung model request delays only what must wait for it (worker/agent/concurrency.py).

Two workers (threads, each with its own Redis connection, as a threaded `codebot worker` runs
questions) ask one scripted server. Whether the server serves several requests at once is
observed from their requests, never guessed: only a server seen serving one at a time makes
every worker wait for a request another worker abandoned.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.e2e import Rig, build_rig
from tests.support.model_server import Reply, held_mid_stream, last_user_text, paced, text, tool_calls
from worker.agent.endpoint_memory import EndpointMemory
from worker.jobs.job import QuestionRun
from worker.jobs.question import Question
from worker.jobs.status_view import status_facts
from worker.ops.redis_connection import connect

READ = tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}))
ANSWER = "It tries 5 times [payments:payments/retry.py#L3]."


def holding(marker: str, held: Callable[[Reply], Reply]) -> Callable[[dict[str, Any]], Reply]:
    """A model that reads, then answers; the first request of a question naming `marker` is
    answered with `held(the read)`."""

    def reply(body: dict[str, Any]) -> Reply:
        if body["messages"][-1]["role"] == "tool":
            return text(ANSWER)
        return held(READ) if marker in last_user_text(body) else READ

    return reply


def before_replying(released: threading.Event) -> Callable[[Reply], Reply]:
    """Held open on the server, not a byte sent, until `released` (a hung request)."""

    def hold(reply: Reply) -> Reply:
        released.wait(120)
        return reply

    return hold


def run_on_a_worker(rig: Rig, question: Question, runtime: Any = None) -> threading.Thread:
    """The question answered on a worker thread of its own, with its own Redis connection."""
    own_redis = connect(rig.settings)
    worker = threading.Thread(target=lambda: QuestionRun(runtime or rig.runtime, own_redis, question).run())
    worker.start()
    return worker


def endpoint_facts(rig: Rig) -> dict[str, Any]:
    facts = status_facts(rig.redis, rig.runtime)["model"]["endpoints"]
    return next(e for e in facts if e["configured"])


def test_a_request_hung_on_one_worker_does_not_delay_another_workers_question(tmp_path: Path) -> None:
    released = threading.Event()
    for rig in build_rig(tmp_path, question_deadline_seconds=30.0, model_timeout_seconds=10.0):
        rig.model.set_handler(holding("(hangs)", before_replying(released)))
        first = rig.question("How does retry work? (hangs)")
        run_on_a_worker(rig, first).join()  # its one attempt timed out; the server still holds it
        assert rig.final(rig.events(first))[0] == "failed" and not released.is_set()
        # another worker's ordinary question: a deadline shorter than the abandoned request may
        # still run, so it is answered only if it does not wait for that request
        hurried = rig.settings.model_copy(update={"question_deadline_seconds": 6.0})
        second = rig.question("How many times does retry try?")
        run_on_a_worker(rig, second, dataclasses.replace(rig.runtime, settings=hurried)).join()
        kind, fields = rig.final(rig.events(second))
        assert kind == "answer" and "5 times" in fields["markdown"]
        assert not released.is_set()  # answered while the hung request is still held open
        released.set()
        assert len(rig.model.requests) == 3  # the hung one, then the second question's two


def test_a_server_seen_serving_one_request_at_a_time_says_so_and_makes_every_worker_wait(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for rig in build_rig(tmp_path, model_options={"slots": 1}):
        # a pair whose first reply was read late proves nothing (test_model_concurrency_verdict.py):
        # on a loaded machine a second pair may be needed, never a wrong verdict
        for pair in range(6):
            released = threading.Event()
            # the held reply, once released, still takes a while to write: the second waits behind it
            rig.model.set_handler(
                holding(
                    "(slow)", lambda reply, released=released: paced(0.2, before_replying(released)(reply))
                )
            )
            first = run_on_a_worker(rig, rig.question("How does retry work? (slow)"))
            rig.model.wait_for_requests(4 * pair + 1)
            second = run_on_a_worker(rig, rig.question("How many times does retry try?"))
            rig.model.wait_for_requests(4 * pair + 2)  # arrived while the first is served: it waits its turn
            released.set()
            first.join()
            second.join()
            facts = endpoint_facts(rig)
            assert facts["concurrency"] in (None, 1)
            if facts["concurrency"] == 1:
                break
        assert facts["concurrency"] == 1
        requests_before = len(rig.model.requests)
        assert "serves one request at a time (observed)" in facts["summary"]
        # from now on a request abandoned on it makes every worker wait, as it would be queued anyway
        EndpointMemory(rig.settings, rig.redis).remember_busy_until(time.time() + 600)
        with caplog.at_level(logging.WARNING, "codebot"):
            kind, _ = rig.final(rig.ask("Where is retry defined?")[1])
        assert kind == "failed" and len(rig.model.requests) == requests_before  # the pairs' only
        assert "serves one request at a time (observed) and is still busy" in caplog.text


def test_a_server_seen_serving_requests_at_once_is_asked_despite_another_workers_abandoned_request(
    tmp_path: Path,
) -> None:
    released = threading.Event()
    for rig in build_rig(tmp_path):
        rig.model.set_handler(holding("(slow)", lambda reply: held_mid_stream(released, reply)))
        first = run_on_a_worker(rig, rig.question("How does retry work? (slow)"))
        rig.model.wait_for_requests(1)
        second = run_on_a_worker(rig, rig.question("How many times does retry try?"))
        second.join()  # answered while the first's reply is still coming in
        released.set()
        first.join()
        facts = endpoint_facts(rig)
        assert facts["concurrency"] == 2 and "serves 2 requests at once (observed)" in facts["summary"]
        EndpointMemory(rig.settings, rig.redis).remember_busy_until(time.time() + 600)
        assert rig.final(rig.ask("Where is retry defined?")[1])[0] == "answer"
