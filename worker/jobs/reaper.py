"""A dead worker's questions are found within seconds, not RQ's minutes.

RQ keeps each running job in a StartedJobRegistry entry that the worker's parent process
renews every `job_monitoring_interval`; the entry expires `get_heartbeat_ttl` seconds after
the last renewal, and only then may another worker's maintenance pass (RQ: every 10 min; an
idle worker even waits out its whole blocking dequeue first) run the failure callback and
retry the job. Here:

- CodebotWorker renews every `worker_heartbeat_seconds` (5) with an entry that lives that
  plus `worker_heartbeat_grace_seconds` (15), instead of RQ's fixed +60 s;
- a work horse dies with its worker (PR_SET_PDEATHSIG): a horse orphaned by a killed parent
  would keep answering with nobody renewing its entry, then race its own retry;
- a missed heartbeat (Redis restarting) is logged, not fatal: RQ would end the worker;
- a job taken from the queue but not yet registered as started lives only in its worker's
  memory: Redis failing in that window (a restart, a failover, a stall) is waited out
  (`hold_on`) instead of dropping the job, as RQ would (worker.jobs.orphans is the safety net
  for a worker that dies there);
- `reap_abandoned` (run by every machine's housekeeper every `reaper_interval_seconds`, 5)
  hands expired entries to RQ's own cleanup, under RQ's own maintenance lock so that two
  machines never retry one job twice.

So a question whose worker died is retried (at the front of the queue) or its asker told
within heartbeat + grace + reaper interval: at most 25 s with the defaults.

A stalled Redis is not a dead worker. While Redis does not answer (a long fsync, a swapped-out
or SIGSTOPped server, a slow failover), no worker can renew its entries, so once it answers
again every running question looks abandoned, and reaping then would spend each one's retry
and tell its asker "trying again…" while its worker is still answering. A live worker renews
within one `worker_heartbeat_seconds` of Redis answering again; a dead one never does. So the
reaper reaps only entries whose workers had a whole heartbeat TTL (heartbeat + grace) of a
reachable Redis to renew them: `Reachability` remembers when this reaper last found Redis
unreachable (a call that failed, or one that took longer than `SLOW_CALL_SECONDS`, i.e. waited
on a stall), and the reaper leaves expired entries alone until a heartbeat TTL after that. A
dead worker's question is then retried at most one heartbeat TTL later than without the stall.
Why the reaper's own view: the stall is Redis's, so every machine's reaper sees it, and no
clock is compared across machines. A worker cut off from Redis alone (a partition) is, to the
others, the same as a dead one: it is reaped, and its late answer is dropped by the answered
marker. RQ's own maintenance pass (every worker, every `worker_maintenance_interval_seconds`)
cleans the other registries but leaves the started one to this reaper (`clean_registries`).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any, TypeVar

from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq import Queue, Worker, worker_registration
from rq.job import Job
from rq.registry import DeferredJobRegistry, FailedJobRegistry, FinishedJobRegistry, StartedJobRegistry
from rq.timeouts import TimerDeathPenalty
from rq.utils import current_timestamp, now

from config.settings import Settings
from worker.jobs.command_channel import subscribe_to_commands, unsubscribe_from_commands
from worker.jobs.worker_model import model_field, model_settings
from worker.ops.claims import claim, new_token, release

log = logging.getLogger("codebot.reaper")

_PR_SET_PDEATHSIG = 1
# Held while reaping; RQ's maintenance pass holds the same key while it cleans (SET NX), so
# the two never clean one registry at once. Ours expires fast should a reaper die holding it;
# RQ's lives 899 s, so one still held 60 s after RQ took it was left by a worker that died
# mid-pass (a pass takes milliseconds) and is broken rather than waited out for 15 minutes.
REAPER_LOCK_SECONDS = 30
# Two stop signals closer than this are one stop request delivered twice (see request_force_stop).
DUPLICATE_SIGNAL_SECONDS = 3.0
RQ_MAINTENANCE_LOCK_SECONDS = 899
STALE_RQ_LOCK_SECONDS = 60
# A worker holding a job it took from the queue tries Redis this often, this long (see hold_on).
HOLD_RETRY_SECONDS = 0.5
HOLD_MAX_SECONDS = 300.0
REDIS_TROUBLE = (RedisConnectionError, RedisTimeoutError)
# A Redis call that took longer than this waited on a stalled server (a healthy one answers in
# milliseconds; a busy machine in tens of them).
SLOW_CALL_SECONDS = 2.0

T = TypeVar("T")


class Reachability:
    """When this process last found Redis unreachable, and whether workers have since had
    `settle_seconds` (a heartbeat TTL) of a reachable Redis to renew their entries."""

    def __init__(self, settle_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.settle_seconds = settle_seconds
        self.clock = clock
        # A housekeeper that just started does not know what Redis went through: it waits one TTL.
        self.reachable_since = clock()

    def timed(self, call: Callable[[], T]) -> T:
        """`call` (a Redis call), noting Redis as unreachable until now if it failed or waited."""
        started = self.clock()
        try:
            result = call()
        except REDIS_TROUBLE:
            self.reachable_since = self.clock()
            raise
        finished = self.clock()
        if finished - started > SLOW_CALL_SECONDS:
            log.warning(
                "reaper: Redis took %.1f s to answer; reaping waits %g s",
                finished - started,
                self.settle_seconds,
            )
            self.reachable_since = finished
        return result

    def settled_for(self) -> float:
        """Seconds since Redis was last found unreachable."""
        return self.clock() - self.reachable_since

    def settled(self) -> bool:
        return self.settled_for() >= self.settle_seconds


def hold_on(what: str, action: Callable[[], T]) -> T:
    """`action` (a Redis call about a job this worker took from the queue), tried until Redis
    answers: nothing else knows where the job is until it is registered as started."""
    deadline = time.monotonic() + HOLD_MAX_SECONDS
    told = False
    while True:
        try:
            return action()
        except REDIS_TROUBLE as exc:
            if time.monotonic() > deadline:
                log.error(
                    "%s: Redis unreachable for %g s (%s); left to the orphan check",
                    what,
                    HOLD_MAX_SECONDS,
                    exc,
                )
                raise
            if not told:
                log.warning("%s: Redis unreachable (%s); holding on to it until Redis is back", what, exc)
                told = True
            time.sleep(HOLD_RETRY_SECONDS)


class CodebotQueue(Queue):
    """RQ's Queue, except that a job taken from the queue is not dropped when fetching it fails."""

    @classmethod
    def dequeue_any(  # type: ignore[override]  # RQ passes the rest by keyword
        cls, queues: Iterable[Queue], timeout: int | None, connection: Redis, **kwargs: Any
    ) -> tuple[Job, Queue] | None:
        try:
            return super().dequeue_any(queues, timeout, connection=connection, **kwargs)
        except REDIS_TROUBLE as exc:
            job_id, queue = getattr(exc, "job_id", None), getattr(exc, "queue", None)
            if job_id is None or queue is None:
                raise  # nothing was taken from the queue: RQ waits and dequeues again
            job = hold_on(f"job {job_id} taken from {queue.name}", lambda: queue.fetch_job(job_id))
            if job is None:  # deleted meanwhile
                return cls.dequeue_any(queues, timeout, connection=connection, **kwargs)
            return job, queue


def die_with_parent(sig: signal.Signals) -> None:
    """Ask Linux to send `sig` to this process when its parent dies (no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        log.warning("could not tie process %d to its parent's life", os.getpid())
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), sig)


def heartbeat_ttl_seconds(settings: Settings) -> int:
    """How long a running question's registry entry outlives its worker's last heartbeat."""
    return settings.worker_heartbeat_seconds + settings.worker_heartbeat_grace_seconds


def abandoned_bound_seconds(settings: Settings) -> float:
    """The longest a dead worker's question waits before it is retried or its asker told."""
    return heartbeat_ttl_seconds(settings) + settings.reaper_interval_seconds


class CodebotWorker(Worker):
    """RQ's forking Worker with short heartbeats, horses that die with it, a Redis blip that
    costs a heartbeat instead of the worker (or the job it just took), and a command channel
    whose reader stops at once (worker/jobs/command_channel.py)."""

    heartbeat_grace_seconds = 15
    queue_class = CodebotQueue
    model_settings: dict[str, Any] | None = None  # reported in its hash (worker/jobs/worker_model.py)

    def serialize(self) -> dict[str, Any]:
        """RQ's fields of the worker's hash (written at birth, and again if it expired), and
        the model settings it answers with: in the same write, so none is seen without them."""
        return {**super().serialize(), **model_field(self.model_settings)}

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        if pipeline is not None:  # part of a pipeline: its caller meets any failure
            super().heartbeat(timeout, pipeline=pipeline)
            return
        try:
            with self.connection.pipeline() as pipe:  # one round trip, not one per field
                super().heartbeat(timeout, pipeline=pipe)
                pipe.execute()
        except REDIS_TROUBLE as exc:  # RQ beats right after taking a job: do not drop the job for it
            log.warning("worker %s: heartbeat missed (%s)", self.name, exc)

    def prepare_execution(self, job: Job) -> Any:
        """Registers the job as started: until then, only this process knows it was taken."""
        return hold_on(f"job {job.id}", lambda: super(CodebotWorker, self).prepare_execution(job))

    def get_heartbeat_ttl(self, job: Job) -> int:
        return int(self.job_monitoring_interval) + self.heartbeat_grace_seconds

    # A job's end, like its start, waits out a Redis restart: RQ would let the failure end it
    # in the failed registry (or, Redis still gone, leave it to be reaped as abandoned).
    def handle_execution_ended(self, job: Job, queue: Queue, heartbeat_ttl: int) -> None:
        end = super().handle_execution_ended
        self._hold_on_end(job, lambda: end(job, queue, heartbeat_ttl))

    def handle_job_success(self, job: Job, queue: Queue, started_job_registry: StartedJobRegistry) -> None:
        success = super().handle_job_success
        self._hold_on_end(job, lambda: success(job, queue, started_job_registry))

    def handle_job_failure(
        self, job: Job, queue: Queue, started_job_registry: Any = None, exc_string: str = ""
    ) -> None:
        failure = super().handle_job_failure
        self._hold_on_end(job, lambda: failure(job, queue, started_job_registry, exc_string))

    def _hold_on_end(self, job: Job, end: Callable[[], None]) -> None:
        """`end` tried until Redis answers, each time from the state it began with: RQ forgets
        the job's Execution and its stop request while it queues the writes that failed."""
        execution, stopped = self.execution, self._stopped_job_id

        def attempt() -> None:
            self.execution, self._stopped_job_id = execution, stopped
            end()

        hold_on(f"job {job.id}'s end", attempt)

    # While a horse runs, its parent wakes every job_monitoring_interval to write these two
    # to Redis; RQ lets a failed write end the worker (leaving its horse unwatched).
    def maintain_heartbeats(self, job: Job) -> None:
        try:
            super().maintain_heartbeats(job)
        except (RedisConnectionError, RedisTimeoutError) as exc:
            log.warning("worker %s: heartbeat for %s missed (%s); will try again", self.name, job.id, exc)

    def set_current_job_working_time(self, current_job_working_time: float, pipeline: Any = None) -> None:
        try:
            super().set_current_job_working_time(current_job_working_time, pipeline=pipeline)
        except (RedisConnectionError, RedisTimeoutError):
            self.current_job_working_time = current_job_working_time

    def main_work_horse(self, job: Job, queue: Queue) -> None:
        die_with_parent(signal.SIGKILL)
        super().main_work_horse(job, queue)

    def setup_work_horse_signals(self) -> None:
        """A horse rides out SIGTERM: its worker's warm shutdown waits for the question to finish.

        systemd's default KillMode=control-group (and `kill` of a whole process tree) sends
        SIGTERM to every process, horses included; RQ's horse would die at once and spend the
        question's one retry. The horse still ends with its question, on the job timeout, on a
        cold shutdown (SIGKILL from its worker) or with its worker (PR_SET_PDEATHSIG). Ignored,
        not handled, so the horse's git and rg children ride it out too."""
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def clean_registries(self) -> None:
        """RQ's maintenance pass, except the started registry: the housekeeper's reaper cleans
        that, and only once Redis was reachable long enough for live workers to renew their
        entries (RQ's pass would retry every running question right after a long stall)."""
        for queue in self.queues:
            if queue.acquire_maintenance_lock():
                for registry_class in (FinishedJobRegistry, FailedJobRegistry, DeferredJobRegistry):
                    registry_class(
                        name=queue.name,
                        connection=queue.connection,
                        job_class=queue.job_class,
                        serializer=queue.serializer,
                    ).cleanup()
                worker_registration.clean_worker_registry(queue)
                queue.intermediate_queue.cleanup(self, queue)
                queue.release_maintenance_lock()
        self.last_cleaned_at = now()  # type: ignore[assignment]  # RQ declares it None until set

    def subscribe(self) -> None:
        """RQ's command channel, read on a CommandListener: a stop never waits out its read."""
        subscribe_to_commands(self)

    def unsubscribe(self) -> None:
        unsubscribe_from_commands(self)

    def request_force_stop(self, signum: int, frame: FrameType | None) -> None:
        """A second signal is a cold shutdown, unless it is the first one arriving by another
        route: systemd signals every process of the group and `codebot worker --concurrency N`
        forwards the same SIGTERM to its workers (RQ itself allows only 1 s between the two)."""
        first = self._shutdown_requested_date
        if first is not None and (now() - first).total_seconds() < DUPLICATE_SIGNAL_SECONDS:
            log.info(
                "worker %s: signal %s is the same stop request again; still a warm shutdown",
                self.name,
                signum,
            )
            return
        super().request_force_stop(signum, frame)


def make_codebot_worker(
    settings: Settings,
    queues: list[Queue],
    redis: Redis,
    worker_class: type[CodebotWorker] = CodebotWorker,
    **kwargs: object,
) -> CodebotWorker:
    worker = worker_class(
        [CodebotQueue(queue.name, connection=redis) for queue in queues],
        connection=redis,
        job_monitoring_interval=settings.worker_heartbeat_seconds,
        # an idle worker blocks in dequeue for worker_ttl - 15 s; it runs RQ's maintenance
        # (finished/failed registries, stuck jobs) only between two dequeues
        worker_ttl=settings.worker_maintenance_interval_seconds + 15,
        maintenance_interval=settings.worker_maintenance_interval_seconds,
        **kwargs,  # type: ignore[arg-type]
    )
    worker.heartbeat_grace_seconds = settings.worker_heartbeat_grace_seconds
    worker.model_settings = model_settings(settings)
    return worker


def reap_abandoned(
    redis: Redis, queue_names: list[str], reachability: Reachability | None = None
) -> list[str]:
    """Retry (or fail, telling the asker) every job whose worker stopped renewing it; the ids.

    RQ's cleanup runs each job's failure callback (worker.jobs.job.on_question_failed: "trying
    again…" or the apology) and then retries it when a retry is left. With `reachability` (the
    housekeeper's), nothing is reaped until workers had a heartbeat TTL of a reachable Redis
    since it was last found unreachable (see the module's docstring).
    """
    reaped: list[str] = []
    for name in queue_names:
        queue = Queue(name, connection=redis)
        registry = StartedJobRegistry(queue=queue, death_penalty_class=TimerDeathPenalty)
        now = current_timestamp()
        expired = (
            reachability.timed(lambda: registry.get_expired_job_ids(now))  # noqa: B023  # called at once
            if reachability is not None
            else registry.get_expired_job_ids(now)
        )
        if not expired:
            continue
        if reachability is not None and not reachability.settled():
            log.info(
                "reaper: %d question(s) on %s missed their heartbeat, but Redis was unreachable %.0f s ago: "
                "left to their workers until they had %g s to renew them",
                len(expired),
                name,
                reachability.settled_for(),
                reachability.settle_seconds,
            )
            continue
        token = _lock(redis, queue.registry_cleaning_key)
        if token is None:
            continue  # another machine (or RQ's own pass) is cleaning this queue right now
        try:
            expired = registry.get_expired_job_ids(now)  # again, under the lock
            registry.cleanup(now)
        finally:
            release(redis, queue.registry_cleaning_key, token)
        for job_id in expired:
            log.warning("reaper: %s on %s was abandoned by its worker; retried or failed", job_id, name)
        reaped.extend(expired)
    return reaped


def _lock(redis: Redis, key: str) -> str | None:
    """The maintenance lock, held with a token of this pass (None: someone else holds it). A
    token, not a plain `SET NX`: a retried claim must not lock out the pass that took it."""
    token = new_token("reaper")
    if claim(redis, key, token, REAPER_LOCK_SECONDS):
        return token
    ttl = int(redis.ttl(key))
    if REAPER_LOCK_SECONDS < ttl < RQ_MAINTENANCE_LOCK_SECONDS - STALE_RQ_LOCK_SECONDS:
        log.warning("reaper: breaking %s, left by a worker that died during RQ's maintenance pass", key)
        redis.delete(key)
        return token if claim(redis, key, token, REAPER_LOCK_SECONDS) else None
    return None
