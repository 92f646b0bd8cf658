"""Many worker machines, one commit per repo: the wanted commit in Redis, and catching up to it.

Each worker machine keeps its own mirrors under its own CODEBOT_DATA_DIR. The commit questions
should be answered from is the one last fetched anywhere, recorded in Redis
(`codebot:repo:<name>`, field `sha`, written by worker.jobs.admin.record_refresh) by an admin
refresh, a scheduled refresh, or a catch-up that found an even newer commit. Every machine
follows it:

- before answering (QuestionRun calls `catch_up`): a repo whose local snapshot is not the
  wanted commit is synced first, within `catch_up_timeout_seconds` per git step (and at most
  5 s of waiting for a refresh of it already running on this machine); if that fails the
  question is answered from the last good snapshot, and this machine leaves the repo alone for
  `catch_up_retry_seconds` so that a dead remote does not slow every question;
- in the background (worker.jobs.housekeeping, every `refresh_check_seconds`): the same for every
  repo, so that questions rarely wait;
- on a schedule: a repo with `refresh_minutes = N` is fetched once per N-minute period, by
  whichever machine first claims the period in Redis (`SET NX`); the others catch up to what
  it found. Each repo's periods are offset by a hash of its name, so repos with the same
  period do not all fetch at the same second.
"""

from __future__ import annotations

import hashlib
import logging
import socket
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from redis import Redis
from redis.exceptions import RedisError

from worker.jobs.admin import REPO_KEY_PREFIX, record_refresh
from worker.jobs.runtime import Runtime
from worker.repos.mirrors import Mirrors, SyncResult

log = logging.getLogger("codebot.refresh")

SCHEDULE_KEY_PREFIX = "codebot:refresh:period:"
CATCH_UP_LOCK_WAIT_SECONDS = 5.0


def wanted_sha(redis: Redis, name: str) -> str | None:
    """The commit last fetched by any machine, or None when no machine recorded one."""
    raw = redis.hget(REPO_KEY_PREFIX + name, "sha")
    return raw.decode() if isinstance(raw, bytes) else raw


def local_sha(runtime: Runtime, name: str) -> str | None:
    snapshot = runtime.mirrors.current(name)
    return snapshot.sha if snapshot else None


def bounded_mirrors(runtime: Runtime) -> Mirrors:
    """This machine's mirrors, with each git step cut to the catch-up bound and a short wait
    for a refresh already running here: a fetch usually lands within seconds, and a longer one
    (a first clone) is left to finish while the question reads the current snapshot."""
    limit = runtime.settings.catch_up_timeout_seconds
    settings = runtime.settings.model_copy(
        update={
            "git_timeout_seconds": limit,
            "sync_lock_wait_seconds": min(limit, CATCH_UP_LOCK_WAIT_SECONDS),
        }
    )
    return Mirrors(settings, runtime.whitelist)


def recently_failed(runtime: Runtime, name: str, now: float | None = None) -> bool:
    """Did this machine's last fetch of `name` fail less than `catch_up_retry_seconds` ago?"""
    now = time.time() if now is None else now
    row = runtime.mirrors.status_of(name)
    if row.last_error and row.last_attempt_at:
        return now - row.last_attempt_at < runtime.settings.catch_up_retry_seconds
    return False


def catch_up(
    runtime: Runtime,
    redis: Redis,
    names: Iterable[str],
    progress: Callable[[str], None] | None = None,
    mirrors: Mirrors | None = None,
) -> dict[str, SyncResult]:
    """Sync each repo whose local snapshot is not the wanted commit; never raises for git or Redis.

    Repos are synced in parallel (`sync_max_parallel_repos` at a time), so a question about
    all repos after a `/codebot refresh all` elsewhere waits for the slowest fetch, not their
    sum. Returns the syncs it ran. A sync that finds a commit newer than the wanted one records
    it, so the other machines follow this one.
    """
    behind: dict[str, str] = {}
    for name in dict.fromkeys(names):
        try:
            wanted = wanted_sha(redis, name)
        except RedisError as exc:
            log.warning("catch-up of %s skipped: Redis unavailable (%s)", name, exc)
            continue
        if wanted is not None and wanted != local_sha(runtime, name) and not recently_failed(runtime, name):
            behind[name] = wanted
    if not behind:
        return {}
    if progress is not None:
        progress("updating " + ", ".join(f"{name} to commit `{sha[:7]}`" for name, sha in behind.items()))
    syncer = mirrors or bounded_mirrors(runtime)
    with ThreadPoolExecutor(max_workers=min(len(behind), runtime.settings.sync_max_parallel_repos)) as pool:
        results = dict(zip(behind, pool.map(syncer.sync, behind), strict=True))
    for name, result in results.items():
        if not result.ok:
            log.warning(
                "catch-up of %s to %s failed, serving %s: %s",
                name,
                behind[name][:7],
                result.sha,
                result.error,
            )
        elif result.sha and result.sha != behind[name]:
            _record(redis, runtime, result)
    return results


def period_offset_seconds(name: str, period_seconds: int) -> int:
    """A stable offset in [0, period) so repos of one period are not all fetched at once."""
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % period_seconds


def claim_due_refreshes(redis: Redis, runtime: Runtime, now: float | None = None) -> list[str]:
    """The scheduled repos whose current period nobody has claimed yet, claimed for this machine."""
    now = time.time() if now is None else now
    host = socket.gethostname()
    claimed: list[str] = []
    for spec in runtime.whitelist.repos:
        if not spec.refresh_minutes:
            continue
        period = spec.refresh_minutes * 60
        index = int((now + period_offset_seconds(spec.name, period)) // period)
        key = f"{SCHEDULE_KEY_PREFIX}{spec.name}:{index}"
        if redis.set(key, host, nx=True, ex=2 * period):
            claimed.append(spec.name)
    return claimed


def run_due_refreshes(redis: Redis, runtime: Runtime, now: float | None = None) -> list[SyncResult]:
    """Fetch the scheduled repos this machine claimed, and record what it found for everyone."""
    results = []
    for name in claim_due_refreshes(redis, runtime, now):
        result = runtime.mirrors.sync(name)
        _record(redis, runtime, result)
        log.info("scheduled refresh of %s: %s", name, result.sha if result.ok else result.error)
        results.append(result)
    return results


def _record(redis: Redis, runtime: Runtime, result: SyncResult) -> None:
    try:
        record_refresh(redis, runtime, result, socket.gethostname())
    except RedisError as exc:
        log.warning("could not record the refresh of %s: %s", result.name, exc)
