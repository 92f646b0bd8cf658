"""A threaded worker's seat takes the next question once the first one's final message is out,
while RQ's bookkeeping of the first still runs; RQ still records both jobs as finished.

The worker is the real ThreadedWorker over the real (embedded) Redis, run in burst mode in this
process; the jobs are plain functions that say what they saw.
"""

from __future__ import annotations

import threading
from pathlib import Path

from rq import Queue
from rq.job import Job, JobStatus
from rq.registry import FinishedJobRegistry

from config.settings import load_settings
from worker.jobs.reaper import make_codebot_worker
from worker.jobs.threaded_worker import ThreadedWorker, free_seat
from worker.ops.redis_connection import connect, stop_embedded_server

second_started = threading.Event()


def delivered_then_bookkeeping() -> bool:
    """A question whose answer is out (free_seat), then slow bookkeeping: it ends only once the
    next question has started, or after 60 s when nothing could start it."""
    free_seat()
    return second_started.wait(60)


def next_question() -> bool:
    second_started.set()
    return True


def test_a_one_seat_worker_takes_the_next_question_while_the_first_finishes_its_bookkeeping(
    tmp_path: Path,
) -> None:
    settings = load_settings(env_file=None, data_dir=tmp_path / "data")
    redis = connect(settings)
    try:
        queue = Queue("seats", connection=redis)
        first = queue.enqueue(delivered_then_bookkeeping)
        second = queue.enqueue(next_question)
        worker = make_codebot_worker(settings, [queue], redis, ThreadedWorker, seats=1)
        worker.work(burst=True)
        assert Job.fetch(first.id, connection=redis).return_value() is True  # saw the second start
        assert [Job.fetch(j.id, connection=redis).get_status() for j in (first, second)] == [
            JobStatus.FINISHED,
            JobStatus.FINISHED,
        ]
        assert sorted(FinishedJobRegistry(queue=queue).get_job_ids()) == sorted([first.id, second.id])
    finally:
        stop_embedded_server(settings)
