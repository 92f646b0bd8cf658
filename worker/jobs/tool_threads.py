"""What each worker process's tool threads are doing, for operators: stuck calls and an exhausted pool.

A tool call stuck in the kernel (a read on a hung mount) holds its thread for as long as that
lasts (worker/agent/tool_pool.py). The process tells of it in its RQ worker hash (field
`POOL_FIELD`, written whenever the number of stuck threads changes, gone with the worker),
and `/health`, `codebot status`, `/codebot status` and the console read it from there:
a process can look alive to RQ while no tool call of it can run.
"""

from __future__ import annotations

import json
import logging
import socket
from typing import Any

from redis import Redis
from redis.exceptions import RedisError
from rq import Worker
from rq.worker.base import BaseWorker

from worker.agent.tool_pool import PoolState
from worker.agent.tool_round import when_pool_made
from worker.jobs import texts
from worker.ops.json_list import json_field

log = logging.getLogger("codebot.worker")

POOL_FIELD = "codebot_tool_threads"


def publish_tool_threads(worker: BaseWorker) -> None:
    """Write this process's tool threads into `worker`'s hash whenever their stuck count changes."""

    def record(state: PoolState) -> None:
        try:
            with worker.connection.pipeline() as pipe:
                pipe.hset(worker.key, POOL_FIELD, json.dumps(state.as_dict()))
                # as RQ's heartbeat does: a worker gone meanwhile leaves no hash behind for good
                pipe.expire(worker.key, worker.worker_ttl + 60)
                pipe.execute()
        except RedisError as exc:
            log.warning("worker %s: could not record its stuck tool threads (%s)", worker.name, exc)

    when_pool_made(lambda pool: pool.on_change(record))


def tool_threads(redis: Redis, worker: BaseWorker) -> dict[str, Any] | None:
    """What `worker` last recorded of its tool threads (None: nothing ever stuck)."""
    return json_field(redis, worker.key, POOL_FIELD)


def tool_threads_note(facts: dict[str, Any] | None) -> str:
    """The words added to a worker's state: "" while none is stuck."""
    if not facts or not facts.get("stuck"):
        return ""
    if facts.get("exhausted"):
        return texts.TOOL_THREADS_EXHAUSTED.format(stuck=facts["stuck"])
    return texts.TOOL_THREADS_STUCK.format(stuck=facts["stuck"], capacity=facts.get("capacity", "?"))


def stuck_tool_threads(redis: Redis) -> int:
    """Tool threads stuck over all live workers (the `codebot_tool_threads_stuck` gauge)."""
    return sum(
        int((tool_threads(redis, worker) or {}).get("stuck", 0)) for worker in Worker.all(connection=redis)
    )


def unhealthy_reason(redis: Redis, host: str | None = None) -> str | None:
    """Why this machine's workers are unhealthy (`/health`): each one whose tool threads are
    exhausted, named; None when none is."""
    host = host or socket.gethostname()
    exhausted = [
        worker.name
        for worker in Worker.all(connection=redis)
        if worker.hostname == host and (tool_threads(redis, worker) or {}).get("exhausted")
    ]
    if not exhausted:
        return None
    return texts.HEALTH_TOOL_THREADS_EXHAUSTED.format(workers=", ".join(sorted(exhausted)))
