"""The reaper on its own: a question whose worker stopped renewing it is retried first in line.

The started-registry entry is left exactly as a worker that died mid-question leaves it
(dequeued, registered, its expiry passed); tests/test_faults_worker_killed.py kills real workers.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rq import Queue
from rq.registry import StartedJobRegistry

from tests.support.e2e import Rig, build_rig
from worker.question import Question
from worker.queue import ADMIN_QUEUE, QUESTIONS_QUEUE
from worker.reaper import reap_abandoned


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    yield from build_rig(tmp_path)


def abandon(rig: Rig, question: Question, seconds_ago: float = 1.0) -> None:
    """Dequeue the question and register it as started by a worker whose heartbeat ran out."""
    queue = Queue(QUESTIONS_QUEUE, connection=rig.redis)
    job, _ = Queue.dequeue_any([queue], None, connection=rig.redis)  # type: ignore[misc]
    assert job.id == question.id
    registry = StartedJobRegistry(queue=queue)
    rig.redis.zadd(registry.key, {f"{job.id}:dead-worker-execution": time.time() - seconds_ago})


def test_an_abandoned_question_is_retried_first_in_line_and_its_asker_told(rig: Rig) -> None:
    abandoned, waiting = rig.question("abandoned"), rig.question("waiting")
    rig.enqueue(abandoned)
    abandon(rig, abandoned)
    rig.enqueue(waiting)
    assert reap_abandoned(rig.redis, [ADMIN_QUEUE, QUESTIONS_QUEUE]) == [abandoned.id]
    assert Queue(QUESTIONS_QUEUE, connection=rig.redis).job_ids == [abandoned.id, waiting.id]
    progress = [f["text"] for k, f in rig.events(abandoned, timeout=0.5) if k == "progress"]
    assert progress == ["the worker answering this stopped; trying again…"]
    assert reap_abandoned(rig.redis, [QUESTIONS_QUEUE]) == []  # once


def test_a_question_still_renewed_by_its_worker_is_left_alone(rig: Rig) -> None:
    question = rig.question("running")
    rig.enqueue(question)
    abandon(rig, question, seconds_ago=-20)  # expires in 20 s: its worker is alive
    assert reap_abandoned(rig.redis, [QUESTIONS_QUEUE]) == []


def test_a_maintenance_lock_left_by_a_worker_that_died_mid_pass_does_not_stop_the_reaper(rig: Rig) -> None:
    question = rig.question("abandoned")
    rig.enqueue(question)
    abandon(rig, question)
    lock = Queue(QUESTIONS_QUEUE, connection=rig.redis).registry_cleaning_key
    rig.redis.set(lock, "1", ex=899)  # RQ's pass holds it now: wait for it
    assert reap_abandoned(rig.redis, [QUESTIONS_QUEUE]) == []
    rig.redis.set(lock, "1", ex=899 - 100)  # taken 100 s ago: its worker died during the pass
    assert reap_abandoned(rig.redis, [QUESTIONS_QUEUE]) == [question.id]
    assert not rig.redis.exists(lock)
