"""Questions taken from the queue that no worker ever started are queued again.

An RQ worker pops a job id from the queue (BLPOP) and only then registers it as started. A
worker killed in between, or a Redis failover that kept the pop but lost its reply, leaves a
job whose status is `queued` but which is in no queue and no registry: the reaper cannot see
it, and the asker would wait forever. Every machine's housekeeper runs `rescue_orphans`
every half `queue_orphan_grace_seconds`: a job found orphaned is marked, and one still
orphaned a grace period later is pushed back to the front of its queue (no retry is spent;
the answered marker keeps a late second run from answering twice).
"""

from __future__ import annotations

import logging
import time

from redis import Redis
from rq import Queue
from rq.job import Job, JobStatus
from rq.registry import StartedJobRegistry

from worker.ops.claims import claim

log = logging.getLogger("codebot.reaper")

ORPHAN_MARK_PREFIX = "codebot:orphan:"  # job id -> when it was first found orphaned
SCAN_BATCH = 1000


def rescue_orphans(redis: Redis, queue_names: list[str], grace_seconds: float) -> list[str]:
    """Queue again every job of these queues orphaned for `grace_seconds`; their ids."""
    candidates = _queued_job_ids(redis, queue_names)
    if not candidates:
        return []
    rescued: list[str] = []
    for name in queue_names:
        queue = Queue(name, connection=redis)
        waiting = set(queue.get_job_ids())
        running = set(StartedJobRegistry(queue=queue).get_job_ids(cleanup=False))
        found = candidates.get(name, [])
        seen = [job_id for job_id in found if job_id in waiting or job_id in running]
        if seen:  # one call for a whole backlog, not one per waiting question
            redis.delete(*(ORPHAN_MARK_PREFIX + job_id for job_id in seen))
        for job_id in (job_id for job_id in found if job_id not in waiting and job_id not in running):
            orphaned = _orphaned_since(redis, job_id, grace_seconds)
            if orphaned > grace_seconds and redis.delete(ORPHAN_MARK_PREFIX + job_id):
                job = queue.fetch_job(job_id)  # deleting the mark first: one machine requeues it
                if job is not None and job.get_status(refresh=True) == JobStatus.QUEUED:
                    queue.enqueue_job(job, at_front=True)
                    log.warning(
                        "reaper: %s on %s was taken from the queue but never started; queued again",
                        job_id,
                        name,
                    )
                    rescued.append(job_id)
    return rescued


def _queued_job_ids(redis: Redis, queue_names: list[str]) -> dict[str, list[str]]:
    """Ids of jobs whose status is `queued`, by queue."""
    prefix = Job.redis_job_namespace_prefix
    keys = [
        key
        for key in redis.scan_iter(match=f"{prefix}*", count=SCAN_BATCH)
        if b":" not in key[len(prefix) :]  # rq:job:<id>, not rq:job:<id>:dependents and the like
    ]
    found: dict[str, list[str]] = {}
    pipe = redis.pipeline(transaction=False)
    for key in keys:
        pipe.hmget(key, "status", "origin")
    for key, (status, origin) in zip(keys, pipe.execute(), strict=True):
        if status == JobStatus.QUEUED.value.encode() and origin and origin.decode() in queue_names:
            found.setdefault(origin.decode(), []).append(key[len(prefix) :].decode())
    return found


def _orphaned_since(redis: Redis, job_id: str, grace_seconds: float) -> float:
    """Seconds since this job was first found orphaned (0 now, on the first sighting)."""
    now = time.time()
    key = ORPHAN_MARK_PREFIX + job_id
    # the sighting's own time is its token: a retried claim is this sighting, not an earlier one
    if claim(redis, key, repr(now), int(4 * grace_seconds) + 60):
        return 0.0
    first = redis.get(key)
    return now - float(first) if first else 0.0
