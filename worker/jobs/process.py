"""`codebot worker`: N questions in flight on one machine.

The default pool ("threads") holds them in `--processes P` RQ worker processes (default 1),
each a ThreadedWorker answering its share of the N in threads (worker/jobs/threaded_worker.py):
a question mostly waits on the model, and one process holds many for the memory of one. The
"fork" pool is RQ's classic model, kept for operators who want a process per question: N RQ
workers, each forking a work horse per question.

Heavy modules (openai, the agent, the tools) are imported here, in the parent, before any
fork, so no worker or horse pays ~0.5 s of imports; a threaded worker also builds what every
question shares (the redactor's rules, the model client) once, before its first question.
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
from worker.jobs.question_start import make_model_client
from worker.jobs.queue import ADMIN_QUEUE, QUESTIONS_QUEUE, queue_depth
from worker.jobs.reaper import die_with_parent, make_codebot_worker
from worker.jobs.runtime import Runtime
from worker.jobs.threaded_worker import ThreadedWorker, warm_up
from worker.jobs.tool_threads import stuck_tool_threads, unhealthy_reason
from worker.ops.metrics import serve_metrics
from worker.ops.redis_connection import RedisUnavailable, connect, describe, failure_line
from worker.tools.redact import get_redactor

log = logging.getLogger("codebot.worker")
RESTART_PAUSE_SECONDS = 2.0  # a worker that lost Redis tries again this often
TROUBLE_LOG_SECONDS = 60.0  # ... and logs the same trouble again at most this often
_top_pid = 0  # the `codebot worker` process itself


def tell_asker_horse_died(job: Job, _pid: int, _status: int, _usage: struct_rusage) -> None:
    """RQ runs no failure callback for a killed work horse; tell the asker the same way."""
    worker.jobs.job.on_question_failed(job, job.connection)


def make_worker(
    runtime: Runtime, name: str | None = None, start_embedded: bool = True, seats: int | None = None
) -> Worker:
    """A forking worker (`seats` None) or a ThreadedWorker holding `seats` questions at once."""
    redis = connect(runtime.settings, start_embedded=start_embedded)
    queues = [Queue(ADMIN_QUEUE, connection=redis), Queue(QUESTIONS_QUEUE, connection=redis)]
    # Short heartbeats, horses that die with their worker (worker/jobs/reaper.py); RQ's own
    # maintenance pass runs every worker_maintenance_interval_seconds instead of 10 min.
    if seats is None:
        return make_codebot_worker(
            runtime.settings, queues, redis, name=name, work_horse_killed_handler=tell_asker_horse_died
        )
    return make_codebot_worker(runtime.settings, queues, redis, ThreadedWorker, name=name, seats=seats)


def build_shared(runtime: Runtime) -> None:
    """What every question of a threaded worker uses, built once before its first question."""
    warm_up([get_redactor, lambda: make_model_client(runtime)])


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


def _work(runtime: Runtime, burst: bool, index: int, seats: int | None = None) -> None:
    """One RQ worker (forking, or threaded with `seats`); started again when Redis went away
    under it (RQ then quits its loop)."""
    runtime_module.install(runtime)
    if _top_pid and os.getpid() != _top_pid:
        die_with_parent(signal.SIGTERM)  # a child of `codebot worker --concurrency N`: warm stop
    if seats is not None:
        build_shared(runtime)
    else:  # forked horses inherit the compiled rules instead of compiling them per question
        warm_up([get_redactor])
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
            rq_worker = make_worker(runtime, name=name, start_embedded=generation == 0, seats=seats)
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


def seats_per_process(concurrency: int, processes: int) -> list[int]:
    """N questions over P processes, as evenly as they go (no process without a seat)."""
    processes = max(1, min(processes, concurrency))
    return [concurrency // processes + (i < concurrency % processes) for i in range(processes)]


def _plan(runtime: Runtime, burst: bool, concurrency: int, processes: int, pool: str) -> list[int | None]:
    """Seats per worker process (None: a forking worker), logged as the worker starts."""
    plan: list[int | None] = (
        list(seats_per_process(concurrency, processes)) if pool == "threads" else [None] * concurrency
    )
    log.info(
        "worker: %d in parallel (%s)%s, queue on %s, repos %s, data in %s",
        concurrency,
        f"threads in {len(plan)} processes" if pool == "threads" else "a forked horse each",
        " (burst)" if burst else "",
        describe(runtime.settings),
        ", ".join(runtime.whitelist.names()) or "(none)",
        runtime.settings.data_dir,
    )
    return plan


def run_workers(
    runtime: Runtime, burst: bool, concurrency: int, processes: int = 1, pool: str = "threads"
) -> int:
    """`--pool threads`: `concurrency` questions in flight over `processes` threaded workers;
    `--pool fork`: `concurrency` forking RQ workers, one question each."""
    runtime_module.install(runtime)
    plan = _plan(runtime, burst, concurrency, processes, pool)
    if runtime.settings.metrics_port is not None:
        serve_metrics(
            connect(runtime.settings),
            runtime.settings.metrics_port,
            queue_depth,
            host=runtime.settings.metrics_host,
            health=unhealthy_reason,
            stuck=stuck_tool_threads,
        )
    global _top_pid
    _top_pid = os.getpid()
    # Burst workers (tests, one-off runs) have no housekeeper: no reaper, no scheduled refresh.
    housekeeper = None if burst else start_housekeeper(runtime)
    if len(plan) == 1:
        try:
            _work(runtime, burst, 0, plan[0])
        finally:
            if housekeeper is not None:
                _stop(housekeeper)
        return 0
    return _supervise(runtime, burst, plan, housekeeper)


def _supervise(
    runtime: Runtime,
    burst: bool,
    plan: list[int | None],
    housekeeper: multiprocessing.process.BaseProcess | None,
) -> int:
    """A forked worker process per entry of the plan, a signal passed on to each of them and the
    housekeeper; 0 when all of them ended cleanly."""
    context = multiprocessing.get_context("fork")
    children: list[multiprocessing.process.BaseProcess] = [
        context.Process(target=_work, args=(runtime, burst, i, seats), daemon=False)
        for i, seats in enumerate(plan)
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
            len(plan),
        )
        for child in children:
            if child.pid and child.is_alive():
                os.kill(child.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for child in children:
        child.join()
    return 0 if all(child.exitcode == 0 for child in children) else 1
