"""The reaper on its own: a question whose worker stopped renewing it is retried first in line.

The started-registry entry is left exactly as a worker that died mid-question leaves it
(dequeued, registered, its expiry passed); tests/test_faults_worker_killed.py kills real workers.
"""

from __future__ import annotations

import multiprocessing
import time
from dataclasses import replace

from rq import Queue
from rq.job import Job
from rq.registry import StartedJobRegistry

from tests.support.e2e import Rig
from tests.support.model_server import Reply, error
from worker.jobs.housekeeping import run_housekeeper
from worker.jobs.job import QuestionOutcome, QuestionRun, on_question_failed
from worker.jobs.outbox import Final
from worker.jobs.question import Question
from worker.jobs.queue import ADMIN_QUEUE, ANSWERED_KEY_PREFIX, QUESTIONS_QUEUE
from worker.jobs.reaper import reap_abandoned
from worker.jobs.sink import Answer
from worker.ops.redis_connection import connect, socket_path, stop_embedded_server


def abandon(rig: Rig, question: Question, seconds_ago: float = 1.0) -> None:
    """Dequeue the question and register it as started by a worker whose heartbeat ran out."""
    queue = Queue(QUESTIONS_QUEUE, connection=rig.redis)
    job, _ = Queue.dequeue_any([queue], None, connection=rig.redis)  # type: ignore[misc]
    assert job.id == question.id
    registry = StartedJobRegistry(queue=queue)
    rig.redis.zadd(registry.key, {f"{job.id}:dead-worker-execution": time.time() - seconds_ago})


def late_answer(rig: Rig, question: Question) -> QuestionOutcome:
    """A run taken for dead that finishes its answer only now."""
    run = QuestionRun(rig.runtime, rig.redis, question)
    answer = Answer(markdown="late", sources=[], unverified=0, ref=run.ref)
    return run.conclude(QuestionOutcome(status="answered", ref=run.ref), Final(answer=answer))


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


def test_a_run_taken_for_dead_does_not_post_a_failure_after_its_retry_answered(rig: Rig) -> None:
    question = rig.question("how does retry work?")

    def retry_answers_meanwhile(_body: object) -> Reply:
        rig.redis.set(ANSWERED_KEY_PREFIX + question.id, "1")  # the retry elsewhere answered
        return error(401)  # ...and this run's model call then fails: a ModelFailure

    rig.model.set_handler(retry_answers_meanwhile)
    outcome = QuestionRun(rig.runtime, rig.redis, question).run()
    assert outcome.status == "already_answered"
    assert [kind for kind, _ in rig.events(question, timeout=0.5)] == ["received"]


def test_a_failure_is_the_one_final_message_so_a_late_answer_is_not_posted_after_it(rig: Rig) -> None:
    question = rig.question("how does retry work?")
    rig.model.set_handler(lambda _body: error(401))
    assert QuestionRun(rig.runtime, rig.redis, question).run().status == "failed"
    assert late_answer(rig, question).status == "already_answered"  # a run taken for dead, finishing now
    assert [kind for kind, _ in rig.events(question, timeout=0.5) if kind != "received"] == ["failed"]


def test_the_last_apology_for_a_dead_worker_is_posted_once_and_blocks_a_late_answer(rig: Rig) -> None:
    question = rig.question("abandoned")
    rig.enqueue(question)
    job = Job.fetch(question.id, connection=rig.redis)
    job.retries_left = 0
    on_question_failed(job, rig.redis)
    on_question_failed(job, rig.redis)  # reaped again, or by another machine
    assert [kind for kind, _ in rig.events(question, timeout=0.5)] == ["failed"]
    assert late_answer(rig, question).status == "already_answered"
    assert [kind for kind, _ in rig.events(question, timeout=0.5)] == ["failed"]


def test_a_housekeeper_started_while_redis_is_down_reaps_once_it_is_back(rig: Rig) -> None:
    settings = rig.settings.model_copy(
        update={
            "redis_url": f"unix://{socket_path(rig.settings)}",
            "reaper_interval_seconds": 0.2,
            # it reaps a heartbeat TTL after Redis is back (live workers renew first): 2 s here
            "worker_heartbeat_seconds": 1,
            "worker_heartbeat_grace_seconds": 1,
        }
    )
    stop_embedded_server(rig.settings)
    housekeeper = multiprocessing.get_context("fork").Process(
        target=run_housekeeper, args=(replace(rig.runtime, settings=settings),)
    )
    housekeeper.start()
    try:
        time.sleep(1.0)
        assert housekeeper.is_alive()  # waiting for Redis, not dead of it
        connect(rig.settings)  # Redis is back
        question = rig.question("abandoned")
        rig.enqueue(question)
        abandon(rig, question)
        deadline = time.monotonic() + 60  # a hang guard, for a busy machine
        while Queue(QUESTIONS_QUEUE, connection=rig.redis).job_ids != [question.id]:
            assert time.monotonic() < deadline, "the abandoned question was never reaped"
            time.sleep(0.1)
    finally:
        housekeeper.terminate()
        housekeeper.join(10)
