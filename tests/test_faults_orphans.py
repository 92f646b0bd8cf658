"""A question taken from the queue by a worker that never started it is queued again, once.

RQ pops a job id and only then registers it as started: a worker killed in between, or a
Redis failover that kept the pop and lost its reply, leaves a `queued` job in no queue and no
registry. Here a real RQ pop (BLPOP on the embedded Redis) is left unfinished, as such a worker
leaves it, and the housekeeper's orphan check finds it.
"""

from __future__ import annotations

import time

from rq import Queue

from tests.support.e2e import Rig
from tests.support.model_server import answers_after_reading
from worker.jobs.orphans import rescue_orphans
from worker.jobs.queue import ADMIN_QUEUE, QUESTIONS_QUEUE

GRACE_SECONDS = 0.5
QUEUES = [ADMIN_QUEUE, QUESTIONS_QUEUE]


def taken_and_dropped(rig: Rig) -> str:
    """What a worker killed right after its BLPOP leaves: the id popped, nothing registered."""
    popped = Queue.dequeue_any(
        [Queue(QUESTIONS_QUEUE, connection=rig.redis)], timeout=5, connection=rig.redis
    )
    assert popped is not None
    return popped[0].id


def test_a_question_taken_but_never_started_is_queued_again_after_the_grace_and_answered_once(
    rig: Rig,
) -> None:
    rig.model.set_handler(answers_after_reading("answered after all"))
    question = rig.question("how does retry work?")
    rig.enqueue(question)
    assert taken_and_dropped(rig) == question.id
    assert rescue_orphans(rig.redis, QUEUES, GRACE_SECONDS) == []  # first seen: maybe just popped
    time.sleep(GRACE_SECONDS * 2)
    assert rescue_orphans(rig.redis, QUEUES, GRACE_SECONDS) == [question.id]
    assert rescue_orphans(rig.redis, QUEUES, GRACE_SECONDS) == []  # queued once, not twice
    assert Queue(QUESTIONS_QUEUE, connection=rig.redis).job_ids == [question.id]
    rig.work()
    kind, fields = rig.final(rig.events(question))
    assert kind == "answer" and "answered after all" in fields["markdown"]


def test_a_question_waiting_in_the_queue_is_never_taken_for_an_orphan(rig: Rig) -> None:
    waiting = rig.question("still in the queue")
    rig.enqueue(waiting)
    for _ in range(2):
        assert rescue_orphans(rig.redis, QUEUES, GRACE_SECONDS) == []
        time.sleep(GRACE_SECONDS * 2)
    assert Queue(QUESTIONS_QUEUE, connection=rig.redis).job_ids == [waiting.id]  # not pushed twice
