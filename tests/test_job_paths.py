"""RQ keeps a job's function and callbacks as dotted paths in Redis: jobs queued by the previous
release (before worker/ had subpackages) still run after an upgrade, and a job needs the
runtime `codebot worker` installs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rq import Callback, Queue, SimpleWorker
from rq.utils import import_attribute

from tests.support.e2e import Rig
from tests.support.model_server import text, tool_calls
from worker.jobs.queue import ADMIN_QUEUE, QUESTIONS_QUEUE
from worker.repos.refresh import wanted_sha

PREVIOUS_RELEASE_PATHS = (
    "worker.job.answer_question",
    "worker.job.on_question_failed",
    "worker.admin.run_refresh",
    "worker.admin.on_refresh_failed",
)


@pytest.mark.parametrize("path", PREVIOUS_RELEASE_PATHS)
def test_every_path_the_previous_release_queued_still_names_a_function(path: str) -> None:
    assert callable(import_attribute(path))


def test_a_question_queued_by_the_previous_release_is_still_answered(rig: Rig) -> None:
    rig.model.enqueue(
        tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"})),
        text("It tries 5 times [payments:payments/retry.py#L3]."),
    )
    question = rig.question("how many attempts?")
    Queue(QUESTIONS_QUEUE, connection=rig.redis).enqueue_call(
        "worker.job.answer_question",
        args=(question.model_dump_json(),),
        job_id=question.id,
        meta={"target": question.target.model_dump(), "asker": question.asker},
        on_failure=Callback("worker.job.on_question_failed"),
    )
    rig.work()
    kind, fields = rig.final(rig.events(question))
    assert kind == "answer" and "It tries 5 times" in str(fields["markdown"])


def test_a_refresh_queued_by_the_previous_release_still_runs(rig: Rig) -> None:
    Queue(ADMIN_QUEUE, connection=rig.redis).enqueue_call(
        "worker.admin.run_refresh",
        args=(["payments"], '{"platform": "console", "channel": "console"}', "admin"),
        on_failure=Callback("worker.admin.on_refresh_failed"),
    )
    SimpleWorker([Queue(ADMIN_QUEUE, connection=rig.redis)], connection=rig.redis).work(burst=True)
    assert wanted_sha(rig.redis, "payments") == rig.sha


def test_a_job_in_a_process_codebot_worker_did_not_prepare_fails_naming_codebot_worker() -> None:
    code = "from worker.jobs import runtime; runtime.current()"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[1],
        timeout=60,
    )
    assert done.returncode != 0
    assert "RuntimeNotInstalled: no codebot runtime in this process: run questions with `codebot worker`" in (
        done.stderr
    )
