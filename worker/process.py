"""`codebot worker`: N RQ workers on one machine, each forking a work horse per question.

Heavy modules (openai, the agent, the tools) are imported here, in the parent, before any
fork, so a horse does not pay ~0.5 s of imports per question; clients are made inside jobs.
SIGTERM/SIGINT is a warm shutdown: running questions finish first; a second signal stops now.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
from resource import struct_rusage
from types import FrameType

from rq import Queue, Worker
from rq.job import Job

import worker.agent
import worker.job
from worker import runtime as runtime_module
from worker.metrics import serve_metrics
from worker.queue import ADMIN_QUEUE, QUESTIONS_QUEUE
from worker.redis_connection import connect
from worker.runtime import Runtime

log = logging.getLogger("codebot.worker")


def tell_asker_horse_died(job: Job, _pid: int, _status: int, _usage: struct_rusage) -> None:
    """RQ runs no failure callback for a killed work horse; tell the asker the same way."""
    worker.job.on_question_failed(job, job.connection)


def make_worker(runtime: Runtime, name: str | None = None) -> Worker:
    redis = connect(runtime.settings)
    queues = [Queue(ADMIN_QUEUE, connection=redis), Queue(QUESTIONS_QUEUE, connection=redis)]
    return Worker(
        queues,
        connection=redis,
        name=name,
        # RQ's default pass is every 10 min; abandoned questions must be found much sooner.
        maintenance_interval=runtime.settings.worker_maintenance_interval_seconds,
        work_horse_killed_handler=tell_asker_horse_died,
    )


def _work(runtime: Runtime, burst: bool, index: int) -> None:
    runtime_module.install(runtime)
    worker = make_worker(runtime, name=f"codebot-{os.uname().nodename}-{os.getpid()}-{index}")
    worker.work(burst=burst, logging_level="WARNING", with_scheduler=False)


def run_workers(runtime: Runtime, burst: bool, concurrency: int) -> int:
    runtime_module.install(runtime)
    if runtime.settings.metrics_port is not None:
        serve_metrics(connect(runtime.settings), runtime.settings.metrics_port)
    if concurrency == 1:
        _work(runtime, burst, 0)
        return 0
    context = multiprocessing.get_context("fork")
    children = [
        context.Process(target=_work, args=(runtime, burst, i), daemon=False) for i in range(concurrency)
    ]
    for child in children:
        child.start()
    signals_seen = 0

    def forward(signum: int, _frame: FrameType | None) -> None:
        nonlocal signals_seen
        signals_seen += 1
        log.warning(
            "signal %s: %s shutdown of %d workers",
            signum,
            "warm" if signals_seen == 1 else "cold",
            concurrency,
        )
        for child in children:
            if child.pid and child.is_alive():
                os.kill(child.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for child in children:
        child.join()
    return 0 if all(child.exitcode == 0 for child in children) else 1
