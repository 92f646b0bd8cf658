"""Refreshes under way to a known commit: what an answer and `/codebot repos` say of them.

Only a refresh a forge's push asked for (worker/jobs/push_refresh.py) names the commit it is
for: the push's. One is under way while it waits (the repo's pending claim holds its job id) or
runs (its job is in the admin queue's started registry); either way the repo will soon serve
that commit or a newer one. A refresh an admin or the schedule started names no commit, so
nothing is said of it: whether it brings anything new is not known until it ends.
"""

from __future__ import annotations

from collections.abc import Iterable

from redis import Redis
from rq.job import Job, JobStatus
from rq.registry import StartedJobRegistry

from worker.jobs.push_refresh import PENDING_KEY_PREFIX, run_push_refresh
from worker.jobs.queue import ADMIN_QUEUE
from worker.repos.locks import is_sha

PUSH_REFRESH_FUNC = f"{run_push_refresh.__module__}.{run_push_refresh.__name__}"
_UNDER_WAY = (JobStatus.QUEUED, JobStatus.STARTED)


def refreshes_under_way(redis: Redis, names: Iterable[str]) -> dict[str, str]:
    """Repo name -> the full sha a push refresh of it, waiting or running, was queued for; the
    waiting one's when both are (it came from the later push). Raises RedisError."""
    wanted = list(dict.fromkeys(names))
    if not wanted:
        return {}
    pipe = redis.pipeline(transaction=False)
    for name in wanted:
        pipe.get(PENDING_KEY_PREFIX + name)
    waiting = [raw.decode() for raw in pipe.execute() if raw]
    # read only: cleaning the registry up is the workers' and the reaper's business
    running = StartedJobRegistry(ADMIN_QUEUE, connection=redis).get_job_ids(cleanup=False)
    found: dict[str, str] = {}
    # running first, so that a waiting refresh of the same repo (a later push) overrides it
    for job in Job.fetch_many([*running, *waiting], connection=redis):
        if (
            job is None
            or job.func_name != PUSH_REFRESH_FUNC
            or job.get_status(refresh=False) not in _UNDER_WAY
        ):
            continue
        args = job.args
        if len(args) >= 2 and args[0] in wanted and isinstance(args[1], str) and is_sha(args[1]):
            found[args[0]] = args[1]
    return found
