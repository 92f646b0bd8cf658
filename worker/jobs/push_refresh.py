"""Refreshes a forge's push asks for (bot/webhooks/): coalesced per repo, each delivery once.

A push to a repo's tracked branch queues a refresh job on ADMIN_QUEUE, as `/codebot refresh`
does: the worker that takes it syncs the repo with its own mirrors and records the commit it
found in Redis (worker.repos.refresh.record_refresh), which every other worker machine then
catches up to, as after any refresh.

Coalescing: a repo has at most one refresh waiting. The waiting one holds a claim in Redis
(`codebot:webhooks:pending:<repo>`, its job id); a push that finds the claim held is absorbed by
it, since the waiting refresh fetches the branch's head when it runs, which includes that push.
The job gives its claim up as it starts, before fetching: a push arriving while it runs may not
be in what it fetches, so that push queues the next refresh. Hence at most one refresh running
and one waiting per repo, however many pushes arrive, and the last one ends at the newest commit.
A claim whose job is gone (failed to enqueue, deleted) is taken over after CLAIM_SETTLE_SECONDS.

Replays: a delivery id is claimed for `webhooks_replay_seconds`; the same id again is a replay.
"""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import time
import uuid
from typing import Any

from redis import Redis
from rq import Queue, get_current_job

from worker.jobs import runtime as runtime_module
from worker.jobs.queue import ADMIN_QUEUE, is_pending
from worker.ops.claims import claim, new_token, release
from worker.repos.refresh import record_refresh

log = logging.getLogger("codebot.webhooks")

PENDING_KEY_PREFIX = "codebot:webhooks:pending:"  # + repo name -> the job id of its waiting refresh
DELIVERY_KEY_PREFIX = "codebot:webhooks:delivery:"  # + forge:hash of the delivery id
LAST_DELIVERY_KEY = "codebot:webhooks:last"  # hash: forge -> its last delivery, JSON
PUSH_REFRESH_TIMEOUT_SECONDS = 3600  # RQ timeout of one repo's refresh (a first clone may be long)
PUSH_REFRESH_RESULT_TTL_SECONDS = 24 * 3600
# A claim younger than this is never taken over: its job may be between claim and enqueue.
CLAIM_SETTLE_SECONDS = 60.0
PENDING_CLAIM_SECONDS = PUSH_REFRESH_TIMEOUT_SECONDS + CLAIM_SETTLE_SECONDS


def _delivery_key(forge: str, delivery_id: str) -> str:
    digest = hashlib.sha256(delivery_id.encode("utf-8", errors="replace")).hexdigest()[:32]
    return f"{DELIVERY_KEY_PREFIX}{forge}:{digest}"


def first_delivery(redis: Redis, forge: str, delivery_id: str, keep_seconds: float) -> bool:
    """True the first time a forge's delivery id is seen (within `keep_seconds`), False for a replay."""
    return claim(redis, _delivery_key(forge, delivery_id), new_token(), keep_seconds)


def forget_delivery(redis: Redis, forge: str, delivery_id: str) -> None:
    """A delivery that could not be acted on (Redis failed midway): its redelivery is not a replay."""
    redis.delete(_delivery_key(forge, delivery_id))


def enqueue_push_refresh(redis: Redis, name: str, sha: str, forge: str) -> bool:
    """Queue a refresh of `name` unless one is already waiting; True when this call queued one."""
    key = PENDING_KEY_PREFIX + name
    job_id = f"push-refresh-{uuid.uuid4().hex}"
    for _ in range(2):  # at most once more, after taking over a stale claim
        if claim(redis, key, job_id, PENDING_CLAIM_SECONDS):
            Queue(ADMIN_QUEUE, connection=redis).enqueue_call(
                "worker.jobs.push_refresh.run_push_refresh",
                args=(name, sha, forge),
                job_id=job_id,
                timeout=PUSH_REFRESH_TIMEOUT_SECONDS,
                result_ttl=PUSH_REFRESH_RESULT_TTL_SECONDS,
                failure_ttl=PUSH_REFRESH_RESULT_TTL_SECONDS,
                description=f"refresh {name} after a {forge} push",
            )
            return True
        held = redis.get(key)
        if held is None:
            continue  # given up meanwhile: its job started; claim it for the next refresh
        if not _stale(redis, key, held.decode()):
            return False
        release(redis, key, held.decode())
    return False


def _stale(redis: Redis, key: str, job_id: str) -> bool:
    """A claim held for a while whose job is neither waiting nor running."""
    remaining = redis.pttl(key) / 1000
    settled = remaining >= 0 and PENDING_CLAIM_SECONDS - remaining > CLAIM_SETTLE_SECONDS
    return settled and not is_pending(redis, job_id)


def run_push_refresh(name: str, sha: str, forge: str) -> dict[str, Any]:
    """RQ entry point: give up the repo's waiting claim, sync the repo, record what it found."""
    job = get_current_job()
    if job is None:
        raise RuntimeError("run_push_refresh runs inside an RQ job")
    redis: Redis = job.connection
    # Before fetching: a push from now on may not be in this fetch, so it queues the next refresh.
    release(redis, PENDING_KEY_PREFIX + name, job.id)
    runtime = runtime_module.current()
    if runtime.whitelist.get(name) is None:  # the repos file changed since the push was received
        log.warning("push refresh of %s skipped: not in this machine's repos file", name)
        return {"name": name, "ok": False}
    started = time.monotonic()
    result = runtime.mirrors.sync(name)
    record_refresh(redis, runtime.mirrors, result, socket.gethostname(), "push")
    log.info(
        "push refresh of %s (%s push of %s): %s in %.1fs",
        name,
        forge,
        sha[:7],
        result.sha[:7] if result.ok and result.sha else f"failed ({result.error})",
        time.monotonic() - started,
    )
    return {"name": name, "ok": result.ok, "sha": result.sha, "pushed": sha}


def record_delivery(
    redis: Redis, forge: str, verdict: str, status: int, delivery_id: str, repos: str
) -> None:
    """Remember a forge's last delivery for `codebot status` (what came, what was done)."""
    entry = {"at": time.time(), "verdict": verdict, "status": status, "delivery": delivery_id, "repos": repos}
    redis.hset(LAST_DELIVERY_KEY, forge, json.dumps(entry))


def last_deliveries(redis: Redis) -> dict[str, dict[str, Any]]:
    """Each forge's last delivery, as record_delivery stored it (a malformed entry is skipped)."""
    found: dict[str, dict[str, Any]] = {}
    for raw_forge, raw in redis.hgetall(LAST_DELIVERY_KEY).items():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if isinstance(entry, dict):
            found[raw_forge.decode() if isinstance(raw_forge, bytes) else str(raw_forge)] = entry
    return found
