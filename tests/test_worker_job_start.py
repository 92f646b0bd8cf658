"""A threaded worker starts a job as RQ does, in one round trip, and bounds it with RQ's job
timeout over one timer thread per process.

The worker is the real ThreadedWorker over the real (embedded) Redis, run in burst mode in this
process; the jobs are plain functions that report what they saw.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from rq import Queue, get_current_job
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, StartedJobRegistry
from rq.timeouts import JobTimeoutException, TimerDeathPenalty
from rq.worker import Worker

from config.settings import load_settings
from worker.jobs.job_timeouts import SharedTimerDeathPenalty
from worker.jobs.reaper import make_codebot_worker
from worker.jobs.threaded_worker import ThreadedWorker
from worker.ops.deadlines import THREAD_NAME
from worker.ops.redis_connection import connect, stop_embedded_server


@pytest.fixture
def redis(tmp_path: Path) -> Any:
    settings = load_settings(env_file=None, data_dir=tmp_path / "data")
    yield connect(settings), settings
    stop_embedded_server(settings)


def what_rq_shows() -> dict[str, Any]:
    """Run as a job: RQ's view of this job and its worker, read back from Redis."""
    job = get_current_job()
    assert job is not None
    queue = Queue(job.origin, connection=job.connection)
    [worker] = Worker.all(connection=job.connection)
    fetched = Job.fetch(job.id, connection=job.connection)
    return {
        "status": fetched.get_status(),
        "worker_name": fetched.worker_name,
        "started": job.id in StartedJobRegistry(queue=queue).get_job_ids(),
        "intermediate": [i.decode() for i in job.connection.lrange(queue.intermediate_queue_key, 0, -1)],
        "worker_state": worker.get_state(),
        "current_job": worker.get_current_job_id(),
    }


def test_a_taken_job_is_started_busy_and_registered_before_its_function_runs(redis: Any) -> None:
    connection, settings = redis
    queue = Queue("start", connection=connection)
    job = queue.enqueue(what_rq_shows)
    worker = make_codebot_worker(settings, [queue], connection, ThreadedWorker, seats=1)
    worker.work(burst=True)
    seen = Job.fetch(job.id, connection=connection).return_value()
    assert seen == {
        "status": JobStatus.STARTED,
        "worker_name": worker.name,
        "started": True,
        "intermediate": [],
        "worker_state": "busy",
        "current_job": job.id,
    }
    assert Job.fetch(job.id, connection=connection).get_status() == JobStatus.FINISHED


def test_a_taken_job_is_started_in_one_round_trip_that_carries_the_workers_heartbeat(redis: Any) -> None:
    connection, settings = redis
    queue = Queue("start", connection=connection)
    job = queue.enqueue(what_rq_shows)
    worker = make_codebot_worker(settings, [queue], connection, ThreadedWorker, seats=1)
    seen: list[list[str]] = []
    with connection.monitor() as monitor:  # on once this returns: Redis answered MONITOR's OK
        reader = threading.Thread(target=lambda: seen.extend(watch(monitor, job.id)), daemon=True)
        reader.start()
        worker.work(burst=True)
        connection.set("done", job.id)
        reader.join(60)  # it reads up to the "done" mark (the bound: a hang guard)
        assert not reader.is_alive()
    fetched = next(i for i, c in enumerate(seen) if c[:2] == ["HGETALL", f"rq:job:{job.id}"])
    # the first transaction after the job is fetched is its start (RQ would beat alone first)
    start = next(i for i, c in enumerate(seen) if i > fetched and c[0] == "MULTI")
    started = seen[start : seen.index(["EXEC"], start) + 1]
    assert ["HSET", worker.key, "state", "busy"] in started
    assert any(c[:3] == ["HSET", worker.key, "last_heartbeat"] for c in started)  # it beats here instead
    assert Job.fetch(job.id, connection=connection).get_status() == JobStatus.FINISHED


def watch(monitor: Any, job_id: str) -> list[list[str]]:
    commands = []
    for event in monitor.listen():
        command = str(event["command"]).split()
        commands.append(command)
        if command == ["SET", "done", job_id]:
            return commands
    return commands


def runs_past_its_timeout() -> str:
    for _ in range(3000):  # 30 s in slices, so RQ's timeout lands between them
        time.sleep(0.01)
    return "never timed out"


def timer_threads() -> int:
    return sum(1 for thread in threading.enumerate() if thread.name == THREAD_NAME)


def test_a_job_past_its_rq_timeout_fails_with_rqs_message_and_the_others_finish(redis: Any) -> None:
    connection, settings = redis
    TimerDeathPenalty(60, JobTimeoutException)  # as the reaper makes one: RQ patches the class's __init__
    queue = Queue("timeouts", connection=connection)
    stuck = queue.enqueue(runs_past_its_timeout, job_timeout=1)
    others = [queue.enqueue(timer_threads) for _ in range(5)]
    worker = make_codebot_worker(settings, [queue], connection, ThreadedWorker, seats=2)
    worker.work(burst=True)
    failed = Job.fetch(stuck.id, connection=connection)
    assert failed.get_status() == JobStatus.FAILED
    assert stuck.id in FailedJobRegistry(queue=queue).get_job_ids()
    result = failed.latest_result()
    assert result is not None and result.exc_string is not None
    assert "JobTimeoutException: Task exceeded maximum timeout value (1 seconds)" in result.exc_string
    counts = [Job.fetch(j.id, connection=connection).return_value() for j in others]
    assert counts == [1] * 5  # every job's timeout watched by the process's one deadline thread


def test_a_timeout_cancelled_at_its_jobs_end_never_fires_and_rqs_class_is_left_as_it_was() -> None:
    landed: list[BaseException] = []
    rqs_init = JobTimeoutException.__init__  # as this process has it (RQ's own timer patches it)
    for _ in range(20):
        with SharedTimerDeathPenalty(0.01, JobTimeoutException):
            pass  # the job ended before its timeout
    try:
        for _ in range(30):
            time.sleep(0.01)  # past every deadline above, in slices where an exception would land
    except JobTimeoutException as exc:
        landed.append(exc)
    assert landed == []
    assert JobTimeoutException.__init__ is rqs_init
