"""One RQ worker process that holds many questions in flight, each in a thread of its own.

A question spends almost all of its time waiting on the model, so a forked work horse per
question (two Python processes, 40–60 MiB PSS each, and the redaction engine and HTTP stack
rebuilt in every horse) buys isolation that nothing here needs. This worker keeps RQ as the
queue and its semantics:

- every question is dequeued, registered in StartedJobRegistry (an RQ Execution), run, and
  moved to the finished or failed registry by RQ's own code (`perform_job`,
  `handle_job_success`, `handle_job_failure`, `handle_job_retry`), so `rq info` and
  rq-dashboard show them as they show a forking worker's; its start (what RQ's
  `prepare_execution` and `prepare_job_execution` write) is one MULTI/EXEC, not three;
- a heartbeat thread renews every in-flight question's registry entry each
  `worker_heartbeat_seconds`; a process killed with its questions stops renewing them all,
  and the reaper (worker/jobs/reaper.py) retries them on other workers within the same bound;
- job timeouts: one timer thread per process (worker/jobs/job_timeouts.py) raises RQ's
  JobTimeoutException in the question's thread (SIGALRM reaches only the main thread). It
  lands when the thread next runs Python: a call blocked in a socket ends first at its own
  timeout, which codebot sets on every call;
- `rq` commands: `stop-job` raises StopJobRequested in that question's thread (the job ends
  STOPPED, as RQ marks a stopped horse's job); `kill-horse` does that to every question in
  flight; `shutdown` is RQ's own (a warm shutdown);
- SIGTERM/SIGINT is a warm shutdown: no new question is taken, the ones in flight finish; a
  second signal (not the first one delivered twice) is a cold shutdown: the process exits at
  once and its questions are left to the reaper, as a killed process's are.

A seat comes free as soon as its question's final message is delivered (or stored for the
outbox to deliver): RQ's bookkeeping of that job (its registries and result, the question's
metrics) ends in the job's thread while the seat takes the next question, so `rq info` may
briefly show one started job more than there are seats.

What is the same for every question (the redactor, the model client, the tool registry, the
HTTP stack) lives in this one process and is built once (`warm_up`), never per question.
"""

from __future__ import annotations

import copy
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from redis.exceptions import RedisError
from rq.command import handle_command, parse_payload
from rq.executions import Execution
from rq.job import Job
from rq.queue import Queue
from rq.utils import now
from rq.worker import WorkerStatus
from rq.worker.base import StopRequested

from worker.jobs.job_timeouts import SharedTimerDeathPenalty, raise_in_thread
from worker.jobs.reaper import DUPLICATE_SIGNAL_SECONDS, CodebotWorker, hold_on
from worker.jobs.tool_threads import publish_tool_threads

log = logging.getLogger("codebot.worker")
SEAT_POLL_SECONDS = 0.2  # a worker whose seats are all taken looks for a stop request this often


class StopJobRequested(BaseException):
    """Raised in a question's thread by `rq`'s stop-job (or kill-horse) command. A
    BaseException, as SIGKILL is to a horse: the question's own `except Exception` must not
    turn it into an apology and a FINISHED job."""


@dataclass
class _InFlight:
    """One question being answered: the seat (a copy of the worker holding this job's RQ
    Execution), the job, its queue, when it started and the thread answering it."""

    seat: ThreadedWorker
    job: Job
    queue: Queue
    started: float
    thread: int = 0


class _Once:
    """Frees a seat exactly once, whoever asks first: the question once it is delivered, or the
    end of its thread."""

    def __init__(self, release: Callable[[], object]) -> None:
        self._release: Callable[[], object] | None = release
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            release, self._release = self._release, None
        if release is not None:
            release()


_this_seat = threading.local()  # the seat of the question this thread answers, if any


def free_seat() -> None:
    """The question answered in this thread has its final message delivered (or stored for the
    outbox): its seat may take the next question while RQ's bookkeeping of this one (registries,
    result, metrics) ends in this thread. A no-op outside a ThreadedWorker's question."""
    release = getattr(_this_seat, "release", None)
    if release is not None:
        release()


class ThreadedWorker(CodebotWorker):
    """CodebotWorker that runs up to `seats` jobs at once in threads of this process."""

    death_penalty_class = SharedTimerDeathPenalty  # one timer thread per process, not one per job

    def __init__(self, *args: Any, seats: int = 1, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seats = max(1, seats)
        self._free_seats = threading.Semaphore(self.seats)
        self._in_flight: dict[str, _InFlight] = {}
        self._lock = threading.Lock()  # guards _in_flight and the worker's busy/idle state
        # per seat: a heartbeat and the end of its Execution never interleave (a late beat
        # would put a finished job back into StartedJobRegistry, where the reaper would fail it)
        self._beat_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._stop_beating = threading.Event()
        self._beater: threading.Thread | None = None
        self._waiting_for_work = False
        self._is_seat = False
        self._idle_shown = False  # _show_state has just written "idle" (see set_state)
        self._job_started = False  # a seat: _start_job wrote what prepare_job_execution would
        self._skip_beat = False  # RQ's next lone heartbeat is carried by _start_job's MULTI
        publish_tool_threads(self)  # a process whose tool threads are stuck says so (status, /health)

    # --- the main thread: take a job when a seat is free, hand it to a thread -----------------

    def dequeue_job_and_maintain_ttl(
        self, timeout: int | None, max_idle_time: int | None = None
    ) -> tuple[Job, Queue] | None:
        self._waiting_for_work = True
        seated = False
        try:
            self._take_seat()
            seated = True
            result = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        except BaseException:
            self._waiting_for_work = False
            if seated:
                self._free_seats.release()
            raise
        self._waiting_for_work = False
        if result is None:
            self._free_seats.release()
        return result

    def reorder_queues(self, reference_queue: Queue) -> None:
        """RQ calls this right after it dequeued a job, then beats alone; the job's start
        (`_start_job`, next) carries the worker's beat in its MULTI: one round trip fewer."""
        super().reorder_queues(reference_queue)
        self._skip_beat = True

    def _take_seat(self) -> None:
        while not self._free_seats.acquire(timeout=SEAT_POLL_SECONDS):
            if self._stop_requested:
                raise StopRequested()

    def execute_job(self, job: Job, queue: Queue) -> None:
        """Registers the job as started (in this thread: until then only this process knows it
        was taken) and answers it in a thread of its own; returns at once."""
        seat = self._seat()
        flight = _InFlight(seat, job, queue, time.monotonic())
        with self._lock:
            self._in_flight[job.id] = flight
        try:
            hold_on(f"job {job.id}", lambda: self._start_job(seat, job))
        except BaseException:
            with self._lock:
                self._in_flight.pop(job.id, None)
            self._free_seats.release()
            raise
        self._skip_beat = True  # RQ's loop beats right after this; the start just did
        self._start_beating()
        thread = threading.Thread(
            target=self._answer, args=(flight,), name=f"codebot-job-{job.id}", daemon=True
        )
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()
        flight.thread = thread.ident or 0

    def _start_job(self, seat: ThreadedWorker, job: Job) -> None:
        """In one round trip (one MULTI/EXEC), what RQ writes in three when a job starts: its
        Execution in StartedJobRegistry (`prepare_execution`), the worker busy with it, and the
        job started by this worker with its heartbeats, out of the intermediate queue
        (`prepare_job_execution`, which the seat then skips)."""
        ttl = seat.get_heartbeat_ttl(job)
        with seat._beat_lock, self.connection.pipeline() as pipe:
            seat.execution = Execution.create(job, ttl, pipeline=pipe, worker_name=self.name)
            super().set_state(WorkerStatus.BUSY, pipeline=pipe)
            super().set_current_job_id(job.id, pipeline=pipe)
            self.heartbeat(pipeline=pipe)
            seat.set_current_job_working_time(0, pipeline=pipe)
            seat.heartbeat(ttl, pipeline=pipe)
            job.heartbeat(now(), ttl, pipeline=pipe)
            job.prepare_for_execution(self.name, pipeline=pipe)
            if len(self.queues) == 1:  # as perform_job decides
                pipe.lrem(Queue(job.origin, connection=self.connection).intermediate_queue_key, 1, job.id)
            pipe.execute()
        seat._job_started = True
        self._idle_shown = False

    def prepare_job_execution(self, job: Job, remove_from_intermediate_queue: bool = False) -> None:
        if self._job_started:  # written with the job's start (_start_job)
            self._job_started = False
            return
        super().prepare_job_execution(job, remove_from_intermediate_queue)

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        if pipeline is None and self._skip_beat:
            self._skip_beat = False  # the job's start carries (or carried) this beat
            return
        super().heartbeat(timeout, pipeline=pipeline)

    def _show_state(self, current: str | None) -> None:
        """Busy (naming one question in flight) or idle, for `rq info`; the caller holds the lock.
        Only a display: a Redis failure here must not cost a question its seat or its thread."""
        try:
            with self.connection.pipeline() as pipe:  # one round trip before the question's thread starts
                super().set_state(WorkerStatus.BUSY if current else WorkerStatus.IDLE, pipeline=pipe)
                self.set_current_job_id(current, pipeline=pipe)
                pipe.execute()
            self._idle_shown = current is None
        except RedisError as exc:
            log.warning("worker %s: could not record its state (%s)", self.name, exc)

    def _seat(self) -> ThreadedWorker:
        seat = copy.copy(self)
        seat._is_seat = True
        seat.execution = None
        seat.current_job_working_time = 0
        seat._stopped_job_id = None
        seat._beat_lock = threading.Lock()
        seat._skip_beat = False
        return seat

    def _answer(self, flight: _InFlight) -> None:
        flight.thread = threading.get_ident()  # also set by the starter: whichever comes first
        release = _this_seat.release = _Once(self._free_seats.release)
        try:
            flight.seat.perform_job(flight.job, flight.queue)
        except BaseException:  # perform_job records every failure of the job itself; not this
            log.exception("worker %s: job %s ended outside RQ's handling", self.name, flight.job.id)
        finally:
            _this_seat.release = None
            with self._lock:
                self._in_flight.pop(flight.job.id, None)
                self._show_state(next(iter(self._in_flight), None))
            release()

    # --- per seat: RQ's bookkeeping, without touching the other seats' state ------------------

    def set_state(self, state: str, pipeline: Any = None) -> None:
        if self._is_seat or (state == WorkerStatus.IDLE and self._in_flight):
            return  # the worker is busy while any seat is: the main object says so
        if state == WorkerStatus.IDLE and pipeline is None and self._idle_shown:
            # RQ's loop says idle before each dequeue; the last question to end has just said
            # so (a round trip between a seat coming free and the next question). Once only.
            self._idle_shown = False
            return
        super().set_state(state, pipeline=pipeline)

    def set_current_job_id(self, job_id: str | None = None, pipeline: Any = None) -> None:
        if self._is_seat:
            return  # `rq info` shows one of the jobs in flight (RQ's worker hash has one field)
        super().set_current_job_id(job_id, pipeline=pipeline)

    def cleanup_execution(self, job: Job, pipeline: Any) -> None:
        with self._beat_lock:
            super().cleanup_execution(job, pipeline)

    # --- heartbeats for every question in flight ---------------------------------------------

    def _start_beating(self) -> None:
        if self._beater is None or not self._beater.is_alive():
            self._stop_beating.clear()
            self._beater = threading.Thread(target=self._beat, name="codebot-heartbeats", daemon=True)
            self._beater.start()

    def _beat(self) -> None:
        while not self._stop_beating.wait(self.job_monitoring_interval):
            with self._lock:
                flights = list(self._in_flight.values())
            for flight in flights:
                self._beat_one(flight)

    def _beat_one(self, flight: _InFlight) -> None:
        seat = flight.seat
        try:
            with seat._beat_lock:
                if seat.execution is None:  # ended meanwhile: nothing to renew
                    return
                seat.current_job_working_time = time.monotonic() - flight.started
                seat.maintain_heartbeats(flight.job)
        except Exception as exc:  # a beat missed is logged; the next one tries again
            log.warning("worker %s: heartbeat for %s failed (%s)", self.name, flight.job.id, exc)

    # --- stopping ------------------------------------------------------------------------------

    def _shutdown(self) -> None:
        """Warm shutdown: take nothing new; what is in flight finishes (see teardown)."""
        if self.scheduler:
            self.stop_scheduler()
        self._stop_requested = True
        self.set_shutdown_requested_date()
        if self._waiting_for_work:
            raise StopRequested()

    def request_force_stop(self, signum: int, frame: FrameType | None) -> None:
        first = self._shutdown_requested_date
        if first is not None and (time.time() - first.timestamp()) < DUPLICATE_SIGNAL_SECONDS:
            super().request_force_stop(signum, frame)  # logs that it is the same request again
            return
        # No lock here: a signal handler runs on top of the main thread, which may hold _lock
        # (a non-reentrant Lock) itself; list() of a dict is one step under the GIL.
        left = list(self._in_flight)
        log.warning(
            "worker %s: cold shutdown; %d questions left to the reaper: %s", self.name, len(left), left
        )
        logging.shutdown()
        os._exit(1)  # threads cannot be killed; the registry entries they leave expire and are reaped

    def teardown(self) -> None:
        """After the loop: wait for the questions in flight, then RQ's own teardown."""
        for thread in list(self._threads):
            thread.join()
        self._stop_beating.set()
        if self._beater is not None:
            self._beater.join(timeout=5)
        super().teardown()

    def kill_horse(self, sig: signal.Signals = signal.SIGKILL) -> None:
        """There is no horse: RQ's forking version would signal this process's own group."""
        log.warning("worker %s: no work horse to kill (questions are threads; see stop_job)", self.name)

    # --- rq's commands ---------------------------------------------------------------------------

    def handle_payload(self, message: dict[Any, Any]) -> None:
        payload = parse_payload(message)
        command = payload.get("command")
        if command == "stop-job":
            self.stop_job(str(payload.get("job_id", "")))
        elif command == "kill-horse":
            with self._lock:
                ids = list(self._in_flight)
            for job_id in ids:
                self.stop_job(job_id)
        else:
            handle_command(self, payload)

    def stop_job(self, job_id: str) -> bool:
        """End one question in flight as RQ's stop-job does (the job ends STOPPED)."""
        with self._lock:
            flight = self._in_flight.get(job_id)
        if flight is None or not flight.thread:
            log.info("worker %s: stop-job %s: not running here", self.name, job_id)
            return False
        flight.seat._stopped_job_id = job_id
        log.warning("worker %s: stopping job %s on request", self.name, job_id)
        return raise_in_thread(flight.thread, StopJobRequested)

    def in_flight(self) -> list[str]:
        with self._lock:
            return list(self._in_flight)


def warm_up(steps: list[Callable[[], object]]) -> None:
    """Build what every question shares once, before the first question (never per question)."""
    for step in steps:
        step()
