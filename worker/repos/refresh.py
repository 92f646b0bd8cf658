"""Many worker machines, one commit per repo: the wanted commit in Redis, and catching up to it.

Each worker machine keeps its own mirrors under its own CODEBOT_DATA_DIR. The commit questions
should be answered from is the one last fetched anywhere, recorded in Redis
(`codebot:repo:<name>`, field `sha`, written by `record_refresh` below) by an admin
refresh, a scheduled refresh, or a catch-up that found an even newer commit. Every machine
follows it:

- before answering (QuestionRun calls `catch_up`): a repo whose local snapshot is not the
  wanted commit is synced first, within `catch_up_timeout_seconds` per git step (and at most
  5 s of waiting for a refresh of it already running on this machine); if that fails the
  question is answered from the last good snapshot, and this machine leaves the repo alone for
  `catch_up_retry_seconds` so that a dead remote does not slow every question;
- in the background (worker.jobs.housekeeping): the same, for the repos named as soon as a
  commit is recorded anywhere (each record also wakes every housekeeper: worker/repos/
  announcements.py), and for every repo every `refresh_check_seconds`, the fallback;
- a repo with no commit recorded in Redis and no snapshot this release can serve (an install
  upgraded from a release that recorded no commits, or whose snapshots were of an older
  format) is synced to its branch's head by the same two paths, and what it found recorded:
  an upgrade heals itself without an operator command (docs/operations.md, "Upgrading");
- on a schedule: a repo with `refresh_minutes = N` is polled once per N-minute period, by
  whichever machine first claims the period in Redis (a claim with a token of its own, so a
  retried claim is never lost to its own first try: worker/ops/claims.py); the others catch
  up to what it found. Each repo's periods are offset by a hash of its name, so repos with the same
  period do not all poll at the same second. With webhooks set up (a forge's secret, or the
  repo's `webhook_secret`) a push refreshes the repo at once, and polling is only the fallback:
  every repo is polled every `webhooks_poll_minutes` (or its longer `refresh_minutes`). A poll
  runs `git ls-remote` first and fetches only when the tip moved (worker/repos/poll.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from redis import Redis
from redis.exceptions import RedisError

from config.repos import RepoSpec
from config.settings import Settings
from worker.history.events import append_event
from worker.ops.claims import claim, new_token
from worker.ops.json_list import json_objects
from worker.repos.announcements import announce_moved
from worker.repos.mirrors import Mirrors, SyncResult
from worker.repos.poll import poll

log = logging.getLogger("codebot.refresh")

REPO_KEY_PREFIX = "codebot:repo:"  # hash per repo: the commit last fetched anywhere, when, where
SCHEDULE_KEY_PREFIX = "codebot:refresh:period:"
SYNC_HISTORY_KEY_PREFIX = "codebot:repo:history:"  # list per repo: its last syncs, JSON, newest first
SYNC_HISTORY_KEPT = 50
CATCH_UP_LOCK_WAIT_SECONDS = 5.0


def wanted_sha(redis: Redis, name: str) -> str | None:
    """The commit last fetched by any machine, or None when no machine recorded one."""
    raw = redis.hget(REPO_KEY_PREFIX + name, "sha")
    return raw.decode() if isinstance(raw, bytes) else raw


def record_refresh(
    redis: Redis,
    mirrors: Mirrors,
    result: SyncResult,
    host: str,
    origin: str = "refresh",
    announce: bool = True,
) -> None:
    """Record in Redis what a sync on `host` found: the commit every machine should now serve.
    `origin`: what ran it (refresh, push, scheduled, catch-up, cli), for the history. `announce`: also
    wake every machine's housekeeper to catch up at once. A catch-up that found a newer commit
    does not: that commit's push queued a refresh, which will announce it, and machines waking
    one another for each commit they fetch mid-burst would sync once per push."""
    snapshot = mirrors.current(result.name)
    fields: dict[str, str] = {
        "ok": "1" if result.ok else "0",
        "host": host,
        "attempted_at": f"{time.time():.3f}",
        "error": result.error or "",
    }
    if result.ok and result.sha:
        fields.update(sha=result.sha, refreshed_at=fields["attempted_at"])
        if snapshot is not None and snapshot.sha == result.sha:
            fields["committed_at"] = f"{snapshot.committed_at:.3f}"
    entry = {"at": float(fields["attempted_at"]), "origin": origin, **sync_facts(mirrors, result, host)}
    pipe = redis.pipeline()
    pipe.hset(REPO_KEY_PREFIX + result.name, mapping=fields)  # type: ignore[arg-type]
    if announce and "sha" in fields:  # every housekeeper wakes and catches up (worker/repos/announcements.py)
        announce_moved(pipe, result.name, fields["sha"])
    # the last SYNC_HISTORY_KEPT syncs of the repo, newest first, for the console (bot/web/)
    pipe.lpush(SYNC_HISTORY_KEY_PREFIX + result.name, json.dumps(entry))
    pipe.ltrim(SYNC_HISTORY_KEY_PREFIX + result.name, 0, SYNC_HISTORY_KEPT - 1)
    append_event(redis, "sync", {"repo": result.name, **entry}, into=pipe)
    pipe.execute()


def sync_facts(mirrors: Mirrors, result: SyncResult, host: str) -> dict[str, Any]:
    """What the history and the console keep of one sync, whatever ran it."""
    facts: dict[str, Any] = {
        "ok": result.ok,
        "host": host,
        "sha": result.sha or "",
        "changed": result.changed,
    }
    facts.update(error=result.error or "", error_kind=result.error_kind, seconds=result.seconds)
    snapshot = mirrors.current(result.name)
    if snapshot is not None:
        facts["size_bytes"] = snapshot.meta.size_bytes
    return facts


def record_sync_event(redis: Redis, mirrors: Mirrors, result: SyncResult, origin: str) -> None:
    """Only the history's record of a sync (one that changes nothing every machine should serve,
    e.g. a failed catch-up); a Redis failure loses it."""
    facts = {"repo": result.name, "origin": origin, **sync_facts(mirrors, result, socket.gethostname())}
    append_event(redis, "sync", facts)


def sync_history(redis: Redis, name: str) -> list[dict[str, Any]]:
    """The repo's recorded syncs, newest first (what record_refresh kept)."""
    return json_objects(redis, SYNC_HISTORY_KEY_PREFIX + name, SYNC_HISTORY_KEPT)


def local_sha(mirrors: Mirrors, name: str) -> str | None:
    snapshot = mirrors.current(name)
    return snapshot.sha if snapshot else None


def bounded_mirrors(mirrors: Mirrors) -> Mirrors:
    """This machine's mirrors, with each git step cut to the catch-up bound and a short wait
    for a refresh already running here: a fetch usually lands within seconds, and a longer one
    (a first clone) is left to finish while the question reads the current snapshot."""
    limit = mirrors.settings.catch_up_timeout_seconds
    settings = mirrors.settings.model_copy(
        update={
            "git_timeout_seconds": limit,
            "sync_lock_wait_seconds": min(limit, CATCH_UP_LOCK_WAIT_SECONDS),
        }
    )
    return Mirrors(settings, mirrors.whitelist, mirrors.cleaner)


def recently_failed(mirrors: Mirrors, name: str, now: float | None = None) -> bool:
    """Did this machine's last fetch of `name` fail less than `catch_up_retry_seconds` ago?"""
    now = time.time() if now is None else now
    row = mirrors.status_of(name)
    if row.last_error and row.last_attempt_at:
        return now - row.last_attempt_at < mirrors.settings.catch_up_retry_seconds
    return False


def catch_up(
    mirrors: Mirrors,
    redis: Redis,
    names: Iterable[str],
    progress: Callable[[str], None] | None = None,
    bounded: bool = True,
    wanted: dict[str, str | None] | None = None,
) -> dict[str, SyncResult]:
    """Sync each repo whose local snapshot is not the wanted commit; never raises for git or Redis.

    Repos are synced in parallel (`sync_max_parallel_repos` at a time), so a question about
    all repos after a `/codebot refresh all` elsewhere waits for the slowest fetch, not their
    sum. `bounded` (before a question): each git step cut to `catch_up_timeout_seconds`; the
    background pass waits as long as any sync may. `wanted`: the commits the caller has just
    read (wanted_sha) for some of the names; the others are read here. Returns the syncs it ran. A sync that finds a commit newer than the wanted one records
    it, so the other machines follow this one.
    """
    behind = _behind(mirrors, redis, names, wanted or {})
    if not behind:
        return {}
    updating = [f"{name} to commit `{sha[:7]}`" for name, sha in behind.items() if sha]
    if progress is not None and updating:  # a first snapshot is not news to the asker
        progress("updating " + ", ".join(updating))
    syncer = bounded_mirrors(mirrors) if bounded else mirrors
    with ThreadPoolExecutor(max_workers=min(len(behind), mirrors.settings.sync_max_parallel_repos)) as pool:
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
            record_sync_event(redis, mirrors, result, "catch-up")
            continue
        log.info("catch-up of %s to %s: serving %s", name, behind[name][:7] or "its head", result.sha)
        if result.sha and result.sha != behind[name]:
            _record(redis, mirrors, result, "catch-up", announce=False)
        else:
            record_sync_event(redis, mirrors, result, "catch-up")
    return results


def _behind(
    mirrors: Mirrors, redis: Redis, names: Iterable[str], known: dict[str, str | None]
) -> dict[str, str]:
    """The repos to sync, each with the commit wanted ("" for the branch's head); a repo whose
    wanted commit Redis cannot say is skipped, and one whose fetch failed lately waits."""
    behind: dict[str, str] = {}
    for name in dict.fromkeys(names):
        try:
            sha = known[name] if name in known else wanted_sha(redis, name)
        except RedisError as exc:
            log.warning("catch-up of %s skipped: Redis unavailable (%s)", name, exc)
            continue
        local = local_sha(mirrors, name)
        # Nothing recorded and nothing servable here: an install upgraded from a release that
        # recorded no commits, or whose snapshots this release cannot serve. Synced to the
        # branch's head all the same (and recorded by catch_up), so it heals without an operator.
        healing = sha is None and local is None
        if (healing or (sha is not None and sha != local)) and not recently_failed(mirrors, name):
            behind[name] = sha or ""
    return behind


def period_offset_seconds(name: str, period_seconds: int) -> int:
    """A stable offset in [0, period) so repos of one period are not all fetched at once."""
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % period_seconds


def claim_due_refreshes(redis: Redis, mirrors: Mirrors, now: float | None = None) -> list[str]:
    """The scheduled repos whose current period nobody has claimed yet, claimed for this machine."""
    now = time.time() if now is None else now
    token = new_token(socket.gethostname())  # the host shows who holds a period
    claimed: list[str] = []
    for spec in mirrors.whitelist.repos:
        minutes = poll_minutes(spec, mirrors.settings)
        if not minutes:
            continue
        period = minutes * 60
        index = int((now + period_offset_seconds(spec.name, period)) // period)
        key = f"{SCHEDULE_KEY_PREFIX}{spec.name}:{index}"
        if claim(redis, key, token, 2 * period):
            claimed.append(spec.name)
    return claimed


def webhooks_set_up(spec: RepoSpec, settings: Settings) -> bool:
    """Can a push to `spec` reach us by webhook: a secret of its own, or any forge's?"""
    forge_secrets = (
        settings.webhooks_github_secret,
        settings.webhooks_gitlab_secret,
        settings.webhooks_gitea_secret,
        settings.webhooks_bitbucket_secret,
    )
    return spec.webhook_secret_variable is not None or any(forge_secrets)


def poll_minutes(spec: RepoSpec, settings: Settings) -> int | None:
    """How often the schedule polls `spec`, in minutes; None: never. Its `refresh_minutes`, and
    with webhooks set up at least `webhooks_poll_minutes`: pushes arrive by webhook, so polling
    is the rare fallback for a delivery lost, and covers a repo with no `refresh_minutes` too."""
    fallback = settings.webhooks_poll_minutes if webhooks_set_up(spec, settings) else 0
    return max(spec.refresh_minutes or 0, fallback) or None


def run_due_refreshes(redis: Redis, mirrors: Mirrors, now: float | None = None) -> list[SyncResult]:
    """Poll the scheduled repos this machine claimed; fetch those whose tip moved (worker/repos/
    poll.py), and record what it found for everyone. Returns the fetches it ran."""
    results = []
    for name in claim_due_refreshes(redis, mirrors, now):
        result = poll(mirrors, redis, name)
        if result is None:
            continue  # the tip is the commit served here: nothing fetched, nothing to record
        _record(redis, mirrors, result, "scheduled")
        log.info("scheduled refresh of %s: %s", name, result.sha if result.ok else result.error)
        results.append(result)
    return results


def _record(redis: Redis, mirrors: Mirrors, result: SyncResult, origin: str, announce: bool = True) -> None:
    try:
        record_refresh(redis, mirrors, result, socket.gethostname(), origin, announce)
    except RedisError as exc:
        log.warning("could not record the refresh of %s: %s", result.name, exc)
