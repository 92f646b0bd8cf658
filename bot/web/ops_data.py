"""What the console's Repos and System pages show: mirrors and syncs, the queue, workers, the
outbox, model endpoints and usage against the budget. Read-only, from Redis (and this machine's
mirrors when the console runs on a worker machine)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from redis import Redis
from rq import Queue, Worker
from sqlalchemy import Engine

from bot.web import texts
from bot.web.sync_data import RepoSyncs, repo_syncs
from worker.agent.endpoint_memory import FEATURE_LABELS, display_url, recent_model_errors
from worker.agent.endpoint_report import describe_endpoint, known_endpoints
from worker.jobs.admin import repo_facts, short_duration
from worker.jobs.outbox_backlog import Backlog, backlog
from worker.jobs.question import reference_id
from worker.jobs.queue import ADMIN_QUEUE, questions_queue
from worker.jobs.runtime import Runtime
from worker.jobs.status_view import webhook_facts
from worker.jobs.tool_threads import tool_threads, tool_threads_note
from worker.jobs.worker_model import reported_model_settings
from worker.ops.accounting import Usage, usage_of_day
from worker.repos.mirror_git import history_depth
from worker.repos.refresh import sync_history

SHOWN_SYNCS = 10
SHOWN_MODEL_ERRORS = 20


@dataclass(frozen=True)
class RepoRow:
    name: str
    description: str
    sha: str
    age: str  # since the last successful sync
    host: str  # the machine of the last successful sync; "" when none is known
    error: str
    depth: str  # commits of history kept here, or that the repo is not cloned here
    disk: str
    syncs: list[dict[str, Any]]
    failures: int
    total: int | None = None  # syncs the history holds (None: read from Redis's capped list)
    since: str = ""  # the oldest of them (UTC)


def human_size(size: int | None) -> str:
    if size is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size} B"


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(epoch))


def _redis_syncs(redis: Redis, name: str) -> RepoSyncs:
    """The repo's syncs from Redis's capped list (no catch-up is in it): without a history."""
    syncs = sync_history(redis, name)
    for entry in syncs:
        entry["when"] = _when(float(entry.get("at") or 0))
    good = next((entry for entry in syncs if entry.get("ok")), None)
    return RepoSyncs(
        shown=syncs[:SHOWN_SYNCS],
        total=len(syncs),
        failures=sum(1 for entry in syncs if not entry.get("ok")),
        last_error="",
        last_good_at=float(good.get("at") or 0) if good else None,
        last_good_host=str(good.get("host") or "") if good else "",
        oldest_at=None,
    )


def repo_rows(redis: Redis, runtime: Runtime, history: Engine | None = None) -> list[RepoRow]:
    """One row per whitelisted repo. `history`: its syncs counted from the history database
    (every machine's, catch-ups included), else from Redis's capped list."""
    now = time.time()
    names = runtime.whitelist.names()
    local = {row.name: row for row in runtime.mirrors.status()}
    recorded = repo_syncs(history, names, SHOWN_SYNCS) if history is not None else {}
    rows = []
    for fact in repo_facts(redis, runtime, names):
        spec = runtime.whitelist.get(fact.name)
        syncs = recorded[fact.name] if history is not None else _redis_syncs(redis, fact.name)
        mirror = local.get(fact.name)
        cloned_here = mirror is not None and mirror.sha is not None
        depth = history_depth(spec, runtime.settings) if spec else None
        size = mirror.size_bytes if mirror and mirror.size_bytes else None
        if size is None:
            size = next((int(e["size_bytes"]) for e in syncs.shown if e.get("size_bytes")), None)
        refreshed = fact.refreshed_at or syncs.last_good_at
        rows.append(
            RepoRow(
                name=fact.name,
                description=fact.description,
                sha=(fact.sha or "")[:12],
                age=short_duration(now - refreshed) if refreshed else texts.NEVER,
                host=syncs.last_good_host or fact.host or (texts.THIS_MACHINE if cloned_here else ""),
                error=syncs.last_error or fact.error or "",
                depth=(texts.ALL_HISTORY if depth is None else f"{depth:,} commits")
                if cloned_here
                else texts.NOT_CLONED_HERE,
                disk=human_size(size),
                syncs=syncs.shown,
                failures=syncs.failures,
                total=syncs.total if history is not None else None,
                since=_when(syncs.oldest_at) if syncs.oldest_at is not None else "",
            )
        )
    return rows


@dataclass(frozen=True)
class WorkerRow:
    name: str
    host: str
    state: str
    current: str  # the reference id of the question it is answering
    model: dict[str, Any] | None = None  # the model settings it reports (worker/jobs/worker_model.py)


@dataclass(frozen=True)
class SystemView:
    queued: int
    oldest_age: str
    admin_queued: int
    workers: list[WorkerRow]
    outbox: Backlog
    endpoints: list[tuple[str, str, str, list[str]]]  # model, endpoint, summary, refused features
    model_errors: list[dict[str, Any]]
    usage: list[tuple[str, Usage]]
    budget: int
    priced: bool
    webhooks: list[dict[str, Any]]  # each forge's last delivery, as `codebot status` shows it
    lookup_since: str = "90d"  # a reference's link looks this far back: as long as the history keeps


def oldest_waiting(queue: Queue, now: float) -> str:
    ids = queue.get_job_ids(0, 1)
    job = queue.fetch_job(ids[0]) if ids else None
    if job is None or job.enqueued_at is None:
        return "-"
    enqueued = job.enqueued_at if job.enqueued_at.tzinfo else job.enqueued_at.replace(tzinfo=UTC)
    return short_duration(now - enqueued.timestamp())


def worker_rows(redis: Redis) -> list[WorkerRow]:
    rows = []
    for worker in sorted(Worker.all(connection=redis), key=lambda w: w.name):
        job_id = worker.get_current_job_id()
        state = str(getattr(worker.get_state(), "value", worker.get_state()))
        note = tool_threads_note(tool_threads(redis, worker))
        rows.append(
            WorkerRow(
                worker.name,
                worker.hostname or "?",
                f"{state}; {note}" if note else state,
                reference_id(job_id) if job_id else "",
                reported_model_settings(redis, worker),
            )
        )
    return rows


def system_view(redis: Redis, runtime: Runtime, days: list[str]) -> SystemView:
    settings = runtime.settings
    now = time.time()
    queue = questions_queue(redis)
    endpoints = []
    for facts in known_endpoints(redis):
        refused = [
            FEATURE_LABELS.get(k.removeprefix("refused:"), k) for k in facts if k.startswith("refused:")
        ]
        endpoints.append(
            (
                facts.get("model", "?"),
                display_url(facts.get("base_url", "?")),
                describe_endpoint(facts),
                refused,
            )
        )
    errors = recent_model_errors(redis, SHOWN_MODEL_ERRORS)
    for entry in errors:
        entry["when"] = time.strftime("%Y-%m-%d %H:%M", time.gmtime(float(entry.get("at") or 0)))
    return SystemView(
        queued=queue.count,
        oldest_age=oldest_waiting(queue, now),
        admin_queued=Queue(ADMIN_QUEUE, connection=redis).count,
        workers=worker_rows(redis),
        outbox=backlog(redis, shown=10),
        endpoints=endpoints,
        model_errors=errors,
        usage=[(day, usage_of_day(redis, day)) for day in days],
        budget=settings.daily_token_budget,
        priced=bool(
            settings.model_input_usd_per_million_tokens or settings.model_output_usd_per_million_tokens
        ),
        webhooks=webhook_facts(redis, now),
        lookup_since=f"{settings.history_retention_days:g}d",
    )
