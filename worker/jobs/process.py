"""`codebot worker`: N RQ workers on one machine, each forking a work horse per question.

Heavy modules (openai, the agent, the tools) are imported here, in the parent, before any
fork, so a horse does not pay ~0.5 s of imports per question; clients are made inside jobs.
SIGTERM/SIGINT is a warm shutdown: running questions finish first; a second signal stops now.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import os
import signal
import time
from resource import struct_rusage
from types import FrameType

from redis.exceptions import RedisError
from rq import Queue, Worker
from rq.job import Job

import worker.agent.loop
import worker.jobs.job
from worker.jobs import runtime as runtime_module
from worker.jobs.housekeeping import run_housekeeper
from worker.jobs.queue import ADMIN_QUEUE, QUESTIONS_QUEUE, queue_depth
from worker.jobs.reaper import die_with_parent, make_codebot_worker
from worker.jobs.runtime import Runtime
from worker.ops.metrics import serve_metrics
from worker.ops.redis_connection import RedisUnavailable, connect, describe, failure_line

log = logging.getLogger("codebot.worker")
RESTART_PAUSE_SECONDS = 2.0  # a worker that lost Redis tries again this often
TROUBLE_LOG_SECONDS = 60.0  # ... and logs the same trouble again at most this often
_top_pid = 0  # the `codebot worker` process itself


def tell_asker_horse_died(job: Job, _pid: int, _status: int, _usage: struct_rusage) -> None:
    """RQ runs no failure callback for a killed work horse; tell the asker the same way."""
    worker.jobs.job.on_question_failed(job, job.connection)


def make_worker(runtime: Runtime, name: str | None = None, start_embedded: bool = True) -> Worker:
    redis = connect(runtime.settings, start_embedded=start_embedded)
    queues = [Queue(ADMIN_QUEUE, connection=redis), Queue(QUESTIONS_QUEUE, connection=redis)]
    # Short heartbeats, horses that die with their worker (worker/jobs/reaper.py); RQ's own
    # maintenance pass runs every worker_maintenance_interval_seconds instead of 10 min.
    return make_codebot_worker(
        runtime.settings, queues, redis, name=name, work_horse_killed_handler=tell_asker_horse_died
    )


class _Trouble:
    """Logs a worker's Redis trouble once, then once a minute while it lasts: a Redis that
    refuses writes for an hour must not write 1,800 identical lines."""

    def __init__(self) -> None:
        self.last: tuple[str, float] | None = None

    def report(self, name: str, trouble: str) -> None:
        if (
            self.last is None
            or self.last[0] != trouble
            or time.monotonic() - self.last[1] > TROUBLE_LOG_SECONDS
        ):
            log.warning("worker %s: %s; starting again every %g s", name, trouble, RESTART_PAUSE_SECONDS)
            self.last = (trouble, time.monotonic())


def _work(runtime: Runtime, burst: bool, index: int) -> None:
    """One RQ worker; started again when Redis went away under it (RQ then quits its loop)."""
    runtime_module.install(runtime)
    if _top_pid and os.getpid() != _top_pid:
        die_with_parent(signal.SIGTERM)  # a child of `codebot worker --concurrency N`: warm stop
    stopping = False
    trouble = _Trouble()
    for generation in itertools.count():
        name = f"codebot-{os.uname().nodename}-{os.getpid()}-{index}" + (
            f".{generation}" if generation else ""
        )
        rq_worker = None
        try:
            # generation 0 may start the embedded Redis; later ones heal it unless an operator
            # stopped it (`codebot redis stop`)
            rq_worker = make_worker(runtime, name=name, start_embedded=generation == 0)
            rq_worker.work(burst=burst, logging_level="WARNING", with_scheduler=False)
        except (RedisError, RedisUnavailable) as exc:
            trouble.report(name, failure_line(describe(runtime.settings), exc))
        else:
            if not (burst or rq_worker._shutdown_requested_date is not None):
                trouble.report(name, "RQ's loop stopped on an error (logged above)")
        if burst or stopping or (rq_worker is not None and rq_worker._shutdown_requested_date is not None):
            return

        def stop(_signum: int, _frame: FrameType | None) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        deadline = time.monotonic() + RESTART_PAUSE_SECONDS
        while not stopping and time.monotonic() < deadline:
            time.sleep(0.1)
        if stopping:
            return


def start_housekeeper(runtime: Runtime) -> multiprocessing.process.BaseProcess:
    """The reaper and the refresher, in a process of their own (worker/jobs/housekeeping.py)."""
    process = multiprocessing.get_context("fork").Process(
        target=run_housekeeper, args=(runtime,), name="codebot-housekeeper", daemon=False
    )
    process.start()
    return process


def _stop(process: multiprocessing.process.BaseProcess) -> None:
    if process.pid and process.is_alive():
        os.kill(process.pid, signal.SIGTERM)
    process.join(timeout=10)


def run_workers(runtime: Runtime, burst: bool, concurrency: int) -> int:
    runtime_module.install(runtime)
    log.info(
        "worker: %d in parallel%s, queue on %s, repos %s, data in %s",
        concurrency,
        " (burst)" if burst else "",
        describe(runtime.settings),
        ", ".join(runtime.whitelist.names()) or "(none)",
        runtime.settings.data_dir,
    )
    if runtime.settings.metrics_port is not None:
        serve_metrics(
            connect(runtime.settings),
            runtime.settings.metrics_port,
            queue_depth,
            host=runtime.settings.metrics_host,
        )
    global _top_pid
    _top_pid = os.getpid()
    # Burst workers (tests, one-off runs) have no housekeeper: no reaper, no scheduled refresh.
    housekeeper = None if burst else start_housekeeper(runtime)
    if concurrency == 1:
        try:
            _work(runtime, burst, 0)
        finally:
            if housekeeper is not None:
                _stop(housekeeper)
        return 0
    context = multiprocessing.get_context("fork")
    children: list[multiprocessing.process.BaseProcess] = [
        context.Process(target=_work, args=(runtime, burst, i), daemon=False) for i in range(concurrency)
    ]
    for child in children:
        child.start()
    if housekeeper is not None:
        children.append(housekeeper)
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
