"""Admin work shared by the chat adapters: who is an admin, refreshing mirrors, status, listings.

`enqueue_refresh` puts one job on ADMIN_QUEUE. The worker that takes it syncs each repo with
its own Mirrors, records the commit it now serves in Redis (worker.repos.refresh.record_refresh:
the commit the team last asked for, which other worker machines can catch up to), then tells the
admin through the platform's notifier (Runtime.notifiers, wired by the composition root) when it
finished and at which commit. A refresh job that dies
or times out tells the admin too (failure callback).

`status_report` and `repos_listing` return Markdown; each adapter converts it for its platform.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC
from typing import Any

from redis import Redis
from redis.exceptions import RedisError
from rq import Callback, Queue, Worker, get_current_job
from rq.job import Job
from rq.registry import FailedJobRegistry, FinishedJobRegistry

from config.settings import Settings
from worker.agent.endpoint_memory import base_url_of, display_url, recent_model_errors
from worker.agent.endpoint_report import NEVER_REACHED, describe_endpoint, known_endpoints
from worker.jobs import feedback, outcomes, texts
from worker.jobs import runtime as runtime_module
from worker.jobs.outbox_backlog import Undelivered, backlog
from worker.jobs.question import ReplyTarget, reference_id
from worker.jobs.queue import ADMIN_QUEUE, questions_queue, queue_depth
from worker.jobs.refresh_watch import refreshes_under_way
from worker.jobs.runtime import Runtime
from worker.jobs.tool_threads import tool_threads, tool_threads_note
from worker.ops.metrics import totals_by
from worker.repos.freshness import age_text
from worker.repos.mirrors import SyncResult
from worker.repos.refresh import REPO_KEY_PREFIX, record_refresh

log = logging.getLogger("codebot.admin")

REFRESH_SECONDS_PER_REPO = 1800  # RQ timeout of a refresh job: this much per repo, plus one more
REFRESH_RESULT_TTL_SECONDS = 24 * 3600
FAILED_WINDOW_SECONDS = 3600  # "failed questions in the last hour"
RECENT_FINISHED_SCANNED = 500  # finished questions looked at for answers that were apologies
SHOWN_REFS = 5
FEEDBACK_WINDOW_DAYS = 30  # the 👍 rate /codebot status shows
SHOWN_MODEL_ERRORS = 5


def admin_keys(settings: Settings) -> set[str]:
    """CODEBOT_ADMINS=`slack:U123,discord:456` -> {"slack:U123", "discord:456"}."""
    return {part.strip() for part in settings.admins.split(",") if part.strip()}


def is_admin(settings: Settings, user_key: str) -> bool:
    return user_key in admin_keys(settings)


# --- refresh -----------------------------------------------------------------------------------


def enqueue_refresh(redis: Redis, names: list[str], notify: ReplyTarget, requested_by: str) -> str:
    """Queue a refresh of `names` on the admin queue; returns the job id."""
    job = Queue(ADMIN_QUEUE, connection=redis).enqueue_call(
        "worker.jobs.admin.run_refresh",
        args=(list(names), notify.model_dump_json(), requested_by),
        timeout=REFRESH_SECONDS_PER_REPO * (len(names) + 1),
        result_ttl=REFRESH_RESULT_TTL_SECONDS,
        failure_ttl=REFRESH_RESULT_TTL_SECONDS,
        meta={"target": notify.model_dump(), "requested_by": requested_by, "names": list(names)},
        on_failure=Callback("worker.jobs.admin.on_refresh_failed"),
        description=f"refresh {', '.join(names)} for {requested_by}",
    )
    return job.id


def run_refresh(names: list[str], target_json: str, requested_by: str) -> dict[str, Any]:
    """RQ entry point: sync each repo on this worker machine, record and report the commits."""
    job = get_current_job()
    if job is None:
        raise RuntimeError("run_refresh runs inside an RQ job")
    runtime = runtime_module.current()
    redis: Redis = job.connection
    host = socket.gethostname()
    started = time.monotonic()
    workers = min(runtime.settings.sync_max_parallel_repos, max(len(names), 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(runtime.mirrors.sync, names))
    for result in results:
        record_refresh(redis, runtime.mirrors, result, host)
    seconds = round(time.monotonic() - started)
    report = texts.REFRESH_REPORT.format(
        host=host, seconds=seconds, lines="\n".join(_result_line(r) for r in results)
    )
    try:
        notify_admin(runtime, ReplyTarget.model_validate_json(target_json), requested_by, report)
    except Exception:  # the refresh is done and recorded: failing the job would tell the admin
        # (on_refresh_failed) that it "did not finish", which is not true
        log.exception("refresh done but its report could not be delivered to %s", requested_by)
    log.info("refresh done names=%s by=%s host=%s seconds=%s", ",".join(names), requested_by, host, seconds)
    return {"host": host, "seconds": seconds, "results": [asdict(r) for r in results]}


def _result_line(result: SyncResult) -> str:
    sha = result.sha[:7] if result.sha else None
    if result.ok:
        change = texts.REFRESH_CHANGED if result.changed else texts.REFRESH_UNCHANGED
        return texts.REFRESH_LINE_OK.format(name=result.name, sha=sha, change=change)
    serving = f"`{sha}`" if sha else "nothing"
    return texts.REFRESH_LINE_FAILED.format(
        name=result.name, error=result.error or "unknown error", sha=serving
    )


def notify_admin(runtime: Runtime, target: ReplyTarget, user: str, markdown: str) -> None:
    """Tell an admin privately through the platform's notifier; logged when there is none (console)."""
    notifier = runtime.notifiers.get(target.platform)
    if notifier is None:
        log.info("admin notice for %s: %s", user, markdown)
        return
    notifier(runtime.settings, target, user, markdown)


def on_refresh_failed(job: Job, connection: Redis, *exc_info: Any) -> None:
    """RQ failure callback: the refresh timed out or its worker died; the admin hears of it."""
    try:
        target = ReplyTarget.model_validate(job.meta.get("target", {}))
        names = ", ".join(f"`{n}`" for n in job.meta.get("names", []))
        text = texts.REFRESH_JOB_FAILED.format(names=names, ref=reference_id(job.id))
        notify_admin(runtime_module.current(), target, str(job.meta.get("requested_by", "")), text)
    except Exception:
        log.exception("refresh failure callback could not tell the admin job=%s", job.id)


# --- what each repo serves -----------------------------------------------------------------------


@dataclass(frozen=True)
class RepoFact:
    name: str
    description: str
    sha: str | None
    committed_at: float | None
    refreshed_at: float | None
    host: str | None  # the worker machine that last refreshed it; None: this machine's mirror
    error: str | None


def repo_facts(redis: Redis, runtime: Runtime, names: Iterable[str]) -> list[RepoFact]:
    """The last refresh recorded in Redis, else what this machine's mirror serves."""
    local = {row.name: row for row in runtime.mirrors.status()}
    facts: list[RepoFact] = []
    for name in names:
        spec = runtime.whitelist.get(name)
        raw: dict[bytes, bytes] = redis.hgetall(REPO_KEY_PREFIX + name)
        got = {k.decode(): v.decode() for k, v in raw.items()}
        row = local.get(name)
        if got.get("sha"):
            facts.append(
                RepoFact(
                    name,
                    spec.description if spec else "",
                    got["sha"],
                    _float(got.get("committed_at")),
                    _float(got.get("refreshed_at")),
                    got.get("host"),
                    got.get("error") or None,
                )
            )
        else:
            facts.append(
                RepoFact(
                    name,
                    spec.description if spec else "",
                    row.sha if row else None,
                    row.committed_at if row else None,
                    row.created_at if row else None,
                    None,
                    got.get("error") or (row.last_error if row else None),
                )
            )
    return facts


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def short_duration(seconds_ago: float | None) -> str:
    """A short human age: `40 s`, `12 min`, `5 h`, `3 d`."""
    if seconds_ago is None:
        return "?"
    seconds = max(0, int(seconds_ago))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def repos_listing(redis: Redis | None, runtime: Runtime, channel_key: str | None) -> str:
    """Markdown: the repos this channel may ask about, with commit, age (worker/repos/freshness.py),
    description, and a refresh under way to a newer commit (worker/jobs/refresh_watch.py).

    The list is configuration: with Redis unreachable (or None) it is still shown, each
    repo's commit as `?` (an adapter's machine has no mirrors to tell from)."""
    names = [r.name for r in runtime.whitelist.repos if channel_key is None or r.allowed_in(channel_key)]
    if not names:
        return texts.NO_REPOS_HERE
    lines = [texts.REPOS_HEADER]
    try:
        if redis is None:
            raise RedisError("no connection")
        facts = repo_facts(redis, runtime, names)
        under_way = refreshes_under_way(redis, names)
    except RedisError:
        for spec in filter(None, map(runtime.whitelist.get, names)):
            description = f" — {spec.description}" if spec.description else ""
            lines.append(texts.REPO_LINE.format(name=spec.name, description=description, state="?"))
        return "\n".join(lines)
    now = time.time()
    for fact in facts:
        state = texts.REPO_NOT_SYNCED
        if fact.sha:  # "fetched": the last refresh that found this commit, on any machine
            age = age_text(fact.committed_at, fact.refreshed_at, now)
            state = texts.REPO_STATE.format(sha=fact.sha[:7], age=age)
            newer = under_way.get(fact.name)
            state += texts.REPO_REFRESHING.format(sha=newer[:7]) if newer and newer != fact.sha else ""
        description = f" — {fact.description}" if fact.description else ""
        lines.append(texts.REPO_LINE.format(name=fact.name, description=description, state=state))
    return "\n".join(lines)


# --- status ----------------------------------------------------------------------------------------


def _ended(job: Job) -> float | None:
    ended = job.ended_at
    if ended is None:
        return None
    return (ended if ended.tzinfo else ended.replace(tzinfo=UTC)).timestamp()


def failed_questions(redis: Redis, since: float) -> list[str]:
    """Ids of questions that ended in failure since `since`: jobs RQ failed (timeouts, dead
    workers) and jobs that finished by apologising."""
    queue = questions_queue(redis)
    failed_ids = FailedJobRegistry(queue=queue).get_job_ids()
    finished_ids = FinishedJobRegistry(queue=queue).get_job_ids(start=-RECENT_FINISHED_SCANNED)
    found: list[str] = []
    for job in Job.fetch_many([*failed_ids, *finished_ids], connection=redis):
        if job is None or (_ended(job) or 0) < since:
            continue
        if job.id in failed_ids:
            found.append(job.id)
            continue
        result = job.return_value()
        if isinstance(result, dict) and result.get("status") == "failed":
            found.append(job.id)
    return found


def delivery_status_lines(redis: Redis, settings: Settings) -> list[str]:
    """Answers stored but not yet taken by their platform (worker/jobs/outbox.py), and those
    given up after `delivery_give_up_seconds`."""
    found = backlog(redis)

    def line(entry: Undelivered) -> str:
        return texts.STATUS_DELIVERY_LINE.format(
            ref=reference_id(entry.question_id),
            platform=entry.platform,
            attempts=entry.attempts,
            age=short_duration(entry.age_seconds),
            error=entry.error or "?",
        )

    bound = short_duration(settings.delivery_give_up_seconds)
    lines = [texts.STATUS_DELIVERY_RETRYING.format(count=found.retrying, bound=bound)]
    lines.extend(line(entry) for entry in found.retrying_shown)
    lines.append(texts.STATUS_DELIVERY_GIVEN_UP.format(count=found.given_up))
    lines.extend(line(entry) for entry in found.given_up_shown)
    return lines


def status_report(redis: Redis, runtime: Runtime) -> str:
    """Markdown for `/codebot status`: queue, workers, recent failures, delivery, last refresh per repo."""
    now = time.time()
    admin_waiting = Queue(ADMIN_QUEUE, connection=redis).count
    lines = [texts.STATUS_TITLE, texts.STATUS_QUEUE.format(questions=queue_depth(redis), admin=admin_waiting)]
    workers = Worker.all(connection=redis)
    lines.append(texts.STATUS_WORKERS.format(count=len(workers)))
    for worker in sorted(workers, key=lambda w: w.name):
        job_id = worker.get_current_job_id()
        raw_state = worker.get_state()
        state = (
            f"busy with `{reference_id(job_id)}`" if job_id else str(getattr(raw_state, "value", raw_state))
        )
        note = tool_threads_note(tool_threads(redis, worker))
        state += f"; {note}" if note else ""
        lines.append(texts.STATUS_WORKER_LINE.format(name=worker.name, host=worker.hostname, state=state))
    lines.append(outcomes_status_line(redis))
    failed = failed_questions(redis, now - FAILED_WINDOW_SECONDS)
    lines.append(texts.STATUS_FAILED.format(count=len(failed)))
    if failed:
        refs = ", ".join(f"`{reference_id(job_id)}`" for job_id in failed[-SHOWN_REFS:])
        lines.append(texts.STATUS_FAILED_REFS.format(refs=refs))
    lines.extend(delivery_status_lines(redis, runtime.settings))
    lines.append(feedback_status_line(redis, now))
    lines.append(texts.STATUS_REPOS)
    for fact in repo_facts(redis, runtime, runtime.whitelist.names()):
        if fact.sha and fact.host:
            detail = texts.STATUS_REPO_REFRESHED.format(
                sha=fact.sha[:7],
                age=short_duration(now - fact.refreshed_at) if fact.refreshed_at else "?",
                host=fact.host,
            )
        elif fact.sha:
            detail = texts.STATUS_REPO_LOCAL.format(
                sha=fact.sha[:7], age=short_duration(now - fact.refreshed_at) if fact.refreshed_at else "?"
            )
        else:
            detail = texts.STATUS_REPO_NEVER
        if fact.error:
            detail += texts.STATUS_REPO_ERROR.format(error=fact.error)
        lines.append(texts.STATUS_REPO_LINE.format(name=fact.name, detail=detail))
    lines.extend(model_status_lines(redis, runtime.settings, now))
    return "\n".join(lines)


def outcome_counts(redis: Redis) -> dict[str, int]:
    """Questions finished so far by outcome kind (worker/jobs/outcomes.py), every kind listed."""
    found = totals_by(redis, "codebot_questions_total", "status")
    counts: dict[str, int] = {kind: int(found.pop(kind, 0)) for kind in outcomes.STATUSES}
    counts.update({kind: int(value) for kind, value in found.items()})  # a kind of another release
    return counts


def outcomes_status_line(redis: Redis) -> str:
    counts = outcome_counts(redis)
    if not any(counts.values()):
        return texts.STATUS_OUTCOMES_NONE
    shown = ", ".join(
        texts.STATUS_OUTCOME_COUNT.format(label=outcomes.LABELS.get(kind, kind), count=count)
        for kind, count in counts.items()
        if count or kind in outcomes.EXIT_CODES
    )
    return texts.STATUS_OUTCOMES.format(counts=shown)


def feedback_status_line(redis: Redis, now: float) -> str:
    """The 👍 rate of the answers users voted on recently (a changed vote counts as its latest)."""
    votes = feedback.tally(redis, now - FEEDBACK_WINDOW_DAYS * 86400)
    if votes.up_rate is None:
        return texts.STATUS_FEEDBACK_NONE.format(days=FEEDBACK_WINDOW_DAYS)
    rate = f"{votes.up_rate:.0%}"
    return texts.STATUS_FEEDBACK.format(days=FEEDBACK_WINDOW_DAYS, up=votes.up, down=votes.down, rate=rate)


def model_status_lines(redis: Redis, settings: Settings, now: float) -> list[str]:
    """The configured model, what each endpoint was found to accept, and the last model errors
    in the server's own words (trimmed and redacted when they were recorded)."""
    lines = [texts.STATUS_MODEL.format(model=settings.model, endpoint=display_url(base_url_of(settings)))]
    endpoints = known_endpoints(redis)
    here = display_url(base_url_of(settings))
    if not any(f.get("base_url") == here and f.get("model") == settings.model for f in endpoints):
        lines.append(
            texts.STATUS_MODEL_ENDPOINT.format(model=settings.model, endpoint=here, facts=NEVER_REACHED)
        )
    for facts in endpoints:
        lines.append(
            texts.STATUS_MODEL_ENDPOINT.format(
                model=facts.get("model", "?"),
                endpoint=display_url(facts.get("base_url", "?")),
                facts=describe_endpoint(facts),
            )
        )
    errors = recent_model_errors(redis, SHOWN_MODEL_ERRORS)
    if errors:
        lines.append(texts.STATUS_MODEL_ERRORS)
    for entry in errors:
        status = f" (HTTP {entry['status']})" if entry.get("status") else ""
        lines.append(
            texts.STATUS_MODEL_ERROR_LINE.format(
                age=short_duration(now - float(entry.get("at") or now)),
                ref=entry.get("ref", "?"),
                kind=entry.get("kind", "?"),
                status=status,
                detail=entry.get("detail") or "(no error text)",
            )
        )
    return lines
