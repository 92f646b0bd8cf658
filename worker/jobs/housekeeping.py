"""One housekeeper process per `codebot worker`: the reaper, the deliverer and the refresher.

It is a process of its own, not a thread of the RQ worker, because RQ forks a work horse per
question: a fork taken while a thread holds a git pipe or a repo's refresh lock would hand
them to the horse, which would keep them until its question ends. It dies with its
`codebot worker` (SIGTERM on the parent's death) and stops on SIGTERM/SIGINT.

- reaper (every `reaper_interval_seconds`): questions of dead workers, on any machine, are
  retried or their askers told (worker.jobs.reaper);
- deliverer (every `delivery_check_seconds`): final messages a platform refused, on any
  machine, are tried again when due (worker.jobs.outbox);
- orphans (every half `queue_orphan_grace_seconds`): questions taken from the queue but never
  started are queued again (worker.jobs.orphans);
- refresher (every `refresh_check_seconds`): scheduled refreshes this machine claims, then
  catching up to commits other machines fetched (worker.repos.refresh);
- follower (as soon as any machine records a commit: a push's refresh, an admin's, a
  scheduled one): the repos it names are caught up at once, not at the refresher's next pass
  (worker/repos/announcements.py). The refresher stays as the fallback.

Each pass survives any error (Redis restarting, a remote down): it is logged and the next
pass tries again.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

from redis import Redis
from redis.exceptions import RedisError

from worker.jobs import runtime as runtime_module
from worker.jobs.orphans import rescue_orphans
from worker.jobs.outbox import deliver_due
from worker.jobs.queue import ADMIN_QUEUE, QUESTIONS_QUEUE
from worker.jobs.reaper import Reachability, die_with_parent, heartbeat_ttl_seconds, reap_abandoned
from worker.jobs.runtime import Runtime
from worker.ops.redis_connection import SOCKET_TIMEOUT_SECONDS, RedisUnavailable, connect
from worker.repos.announcements import newest_entry_id, wait_for_moved
from worker.repos.mirrors import SyncResult
from worker.repos.refresh import catch_up, run_due_refreshes

log = logging.getLogger("codebot.housekeeping")
STOP_POLL_SECONDS = 0.2  # the main thread notices a stop request within this
# One blocking read of the commits recorded elsewhere: well under the Redis client's read
# timeout, and how long a stopping housekeeper may wait for its follower.
FOLLOW_BLOCK_SECONDS = min(2.0, SOCKET_TIMEOUT_SECONDS / 2)


def reaper_pass(redis: Redis, runtime: Runtime) -> None:
    reap_abandoned(redis, [ADMIN_QUEUE, QUESTIONS_QUEUE], _reachability(runtime))


_REACHABILITY: list[Reachability] = []  # one per housekeeper process, made on its first pass


def _reachability(runtime: Runtime) -> Reachability:
    if not _REACHABILITY:
        _REACHABILITY.append(Reachability(heartbeat_ttl_seconds(runtime.settings)))
    return _REACHABILITY[0]


def delivery_pass(redis: Redis, runtime: Runtime) -> None:
    deliver_due(redis, runtime)


def orphan_pass(redis: Redis, runtime: Runtime) -> None:
    rescue_orphans(redis, [ADMIN_QUEUE, QUESTIONS_QUEUE], runtime.settings.queue_orphan_grace_seconds)


def refresher_pass(redis: Redis, runtime: Runtime) -> None:
    run_due_refreshes(redis, runtime.mirrors)
    catch_up(runtime.mirrors, redis, runtime.whitelist.names(), bounded=False)


def follow_pass(
    redis: Redis, runtime: Runtime, after: str, block_seconds: float = FOLLOW_BLOCK_SECONDS
) -> tuple[str, dict[str, SyncResult]]:
    """Wait up to `block_seconds` for commits recorded after stream entry `after`, then catch up
    every repo named since, once (however many entries named it: a burst coalesces). Returns the
    last entry read and the syncs run."""
    after, named = wait_for_moved(redis, after, block_seconds)
    followed = [name for name in named if runtime.whitelist.get(name) is not None]
    return after, catch_up(runtime.mirrors, redis, followed, bounded=False) if followed else {}


def follow_recorded_commits(redis: Redis, runtime: Runtime, stop: threading.Event, after: str) -> None:
    """The follower: follow_pass after follow_pass, from `after` (read before the refresher's
    first pass, so that nothing recorded in between is missed)."""
    while not stop.is_set():
        try:
            after, _ = follow_pass(redis, runtime, after)
        except Exception as exc:  # Redis restarting: read on from `after` once it is back
            log.warning("housekeeping follow_recorded_commits failed: %s", exc)
            stop.wait(runtime.settings.refresh_check_seconds)


def _every(
    seconds: float,
    task: Callable[[Redis, Runtime], None],
    redis: Redis,
    runtime: Runtime,
    stop: threading.Event,
) -> None:
    while not stop.is_set():
        try:
            task(redis, runtime)
        except Exception as exc:  # the next pass tries again
            log.warning("housekeeping %s failed: %s", task.__name__, exc)
        stop.wait(seconds)


class StopRequest:
    """SIGTERM/SIGINT to the housekeeper, seen by its main thread, passed on to the pass threads.

    The signal handler only flips a flag. A Python signal handler runs on top of whatever the
    main thread was doing, and that was mostly `threading.Event.wait`, holding the Event's
    non-reentrant lock: a handler calling `Event.set()` there (or inside a first handler's
    `Event.set()`, when systemd's SIGTERM and the one `codebot worker` forwards land together)
    waited for that lock forever, and the worker never exited. The main thread sets the Event
    itself, outside any handler."""

    def __init__(self) -> None:
        self.requested = False
        self.event = threading.Event()  # what the pass threads wait on

    def on_signal(self, _signum: int, _frame: FrameType | None) -> None:
        self.requested = True  # nothing else: no lock may be taken here

    def wait(self, seconds: float) -> bool:
        """Sleeps up to `seconds` (main thread only); True once a stop was requested."""
        deadline = time.monotonic() + seconds
        while not self.requested and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(STOP_POLL_SECONDS, left))  # a signal ends the nap early
        if self.requested:
            self.event.set()
        return self.requested


def _connect_until_stopped(runtime: Runtime, stop: StopRequest) -> Redis | None:
    """Redis restarting just as the worker starts must not leave this machine without a reaper."""
    while not stop.requested:
        try:
            # the worker started the embedded Redis; after `codebot redis stop`, wait, do not restart it
            return connect(runtime.settings, start_embedded=False)
        except RedisUnavailable as exc:
            log.warning("housekeeping waits for Redis: %s", exc)
            stop.wait(runtime.settings.reaper_interval_seconds)
    return None


def _newest_entry_until_stopped(redis: Redis, runtime: Runtime, stop: StopRequest) -> str | None:
    while not stop.requested:
        try:
            return newest_entry_id(redis)
        except RedisError as exc:
            log.warning("housekeeping waits for Redis: %s", exc)
            stop.wait(runtime.settings.reaper_interval_seconds)
    return None


def run_housekeeper(runtime: Runtime) -> None:
    """The housekeeper process's main: runs until SIGTERM/SIGINT or its parent's death."""
    die_with_parent(signal.SIGTERM)
    runtime_module.install(runtime)
    stop = StopRequest()
    signal.signal(signal.SIGTERM, stop.on_signal)
    signal.signal(signal.SIGINT, stop.on_signal)
    settings = runtime.settings
    redis = _connect_until_stopped(runtime, stop)
    if redis is None:
        return
    after = _newest_entry_until_stopped(redis, runtime, stop)
    if after is None:
        return
    passes = [
        (settings.reaper_interval_seconds, reaper_pass),
        (settings.delivery_check_seconds, delivery_pass),
        (settings.queue_orphan_grace_seconds / 2, orphan_pass),
        (settings.refresh_check_seconds, refresher_pass),
    ]
    threads = [
        threading.Thread(
            target=_every, args=(seconds, task, redis, runtime, stop.event), name=task.__name__, daemon=True
        )
        for seconds, task in passes
    ]
    threads.append(
        threading.Thread(
            target=follow_recorded_commits,
            args=(redis, runtime, stop.event, after),
            name="follow_recorded_commits",
            daemon=True,
        )
    )
    for thread in threads:
        thread.start()
    while not stop.wait(1.0):
        pass
    for thread in threads:
        thread.join(timeout=5)
