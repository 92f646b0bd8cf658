"""`codebot status` in a terminal: the same facts as `/codebot status`, as data, then drawn by Rich.

`status_facts()` gathers them once as plain JSON-able data (`codebot status --json` prints it);
`render_status()` draws them for a terminal. Everything shown comes from Redis and may hold
text others wrote (a repo's fetch error, a model server's error body), so it is drawn as
literal text: never parsed as Rich markup, no chat markup (`**`, backticks) at all.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from redis import Redis
from rich.console import Console
from rich.text import Text
from rq import Queue, Worker

from worker.agent.endpoint_memory import base_url_of, display_url, endpoint_id, recent_model_errors
from worker.agent.endpoint_report import NEVER_REACHED, describe_endpoint, known_endpoints, served_model
from worker.jobs import feedback
from worker.jobs.admin import (
    FAILED_WINDOW_SECONDS,
    FEEDBACK_WINDOW_DAYS,
    SHOWN_MODEL_ERRORS,
    failed_questions,
    repo_facts,
    short_duration,
)
from worker.jobs.outbox_backlog import backlog
from worker.jobs.push_refresh import last_deliveries
from worker.jobs.question import reference_id
from worker.jobs.queue import ADMIN_QUEUE, queue_depth
from worker.jobs.runtime import Runtime
from worker.jobs.tool_threads import tool_threads, tool_threads_note
from worker.ops.accounting import usage_of_day
from worker.ops.redis_connection import describe


def status_facts(redis: Redis, runtime: Runtime) -> dict[str, Any]:
    settings = runtime.settings
    now = time.time()
    delivery = backlog(redis)
    votes = feedback.tally(redis, now - FEEDBACK_WINDOW_DAYS * 86400)
    return {
        "queue": {
            "redis": describe(settings),
            "questions_waiting": queue_depth(redis),
            "admin_jobs_waiting": Queue(ADMIN_QUEUE, connection=redis).count,
        },
        "workers": _worker_facts(redis),
        "failed_last_hour": [
            reference_id(job_id) for job_id in failed_questions(redis, now - FAILED_WINDOW_SECONDS)
        ],
        "delivery": {
            "retrying": delivery.retrying,
            "given_up_last_7_days": delivery.given_up,
            "shown": [asdict(entry) for entry in (*delivery.retrying_shown, *delivery.given_up_shown)],
        },
        "feedback": {"days": FEEDBACK_WINDOW_DAYS, "up": votes.up, "down": votes.down},
        "repos": [
            {
                "name": fact.name,
                "sha": fact.sha,
                "refreshed_at": fact.refreshed_at,
                "host": fact.host,
                "error": fact.error,
            }
            for fact in repo_facts(redis, runtime, runtime.whitelist.names())
        ],
        "webhooks": webhook_facts(redis, now),
        "model": _model_facts(redis, runtime, now),
        "today": _today_facts(redis, runtime),
    }


def webhook_facts(redis: Redis, now: float) -> list[dict[str, Any]]:
    """Each forge's last delivery to `codebot webhooks` (worker/jobs/push_refresh.py), by forge:
    what `codebot status` and the console's System page show."""
    facts = []
    for forge, entry in sorted(last_deliveries(redis).items()):
        at = entry.get("at")
        facts.append(
            {
                "forge": forge,
                "age_seconds": now - at if isinstance(at, int | float) else None,
                "status": entry.get("status"),
                "verdict": str(entry.get("verdict", "")),
                "delivery": str(entry.get("delivery", "")),
                "repos": str(entry.get("repos", "")),
            }
        )
    return facts


def _worker_facts(redis: Redis) -> list[dict[str, Any]]:
    """Every live RQ worker by name: where it runs and which question it is busy with."""
    workers = []
    for worker in sorted(Worker.all(connection=redis), key=lambda w: w.name):
        job_id = worker.get_current_job_id()
        state = worker.get_state()
        workers.append(
            {
                "name": worker.name,
                "host": worker.hostname,
                "state": "busy" if job_id else str(getattr(state, "value", state)),
                "question": reference_id(job_id) if job_id else None,
                "tool_threads": tool_threads(redis, worker),
            }
        )
    return workers


def _today_facts(redis: Redis, runtime: Runtime) -> dict[str, Any]:
    """Today's questions and tokens; the cost only when the model's prices are set."""
    settings = runtime.settings
    usage = usage_of_day(redis)
    priced = settings.model_input_usd_per_million_tokens or settings.model_output_usd_per_million_tokens
    return {
        "questions": usage.questions,
        "tokens": usage.prompt_tokens + usage.completion_tokens,
        "token_budget": settings.daily_token_budget or None,
        "cost_usd": round(usage.cost_usd, 4) if priced else None,
    }


def _model_facts(redis: Redis, runtime: Runtime, now: float) -> dict[str, Any]:
    settings = runtime.settings
    configured = endpoint_id(settings)
    endpoints = []
    seen_configured = False
    for facts in known_endpoints(redis):
        is_configured = facts.get("id") == configured or (
            facts.get("base_url") == display_url(base_url_of(settings))
            and facts.get("model") == settings.model
        )
        seen_configured = seen_configured or is_configured
        endpoints.append(_endpoint(facts, is_configured))
    if not seen_configured:
        # nothing learned: no question has reached it from any worker (or its memory expired)
        endpoints.insert(
            0,
            {
                "model": settings.model,
                "endpoint": display_url(base_url_of(settings)),
                "configured": True,
                "reached": False,
                "summary": NEVER_REACHED,
            },
        )
    errors = [
        {
            "age_seconds": round(now - float(entry.get("at") or now)),
            "ref": entry.get("ref"),
            "kind": entry.get("kind"),
            "status": entry.get("status"),
            "detail": entry.get("detail") or "",
        }
        for entry in recent_model_errors(redis, SHOWN_MODEL_ERRORS)
    ]
    return {
        "model": settings.model,
        "endpoint": display_url(base_url_of(settings)),
        "endpoints": endpoints,
        "errors": errors,
    }


def _endpoint(facts: dict[str, str], configured: bool) -> dict[str, Any]:
    summary = describe_endpoint(facts)
    return {
        "model": facts.get("model", "?"),
        "endpoint": display_url(facts.get("base_url", "?")),
        "configured": configured,
        "reached": not summary.startswith(NEVER_REACHED),
        "server_kind": facts.get("server_kind") or None,
        "refused": sorted(k.removeprefix("refused:") for k in facts if k.startswith("refused:")),
        "ignored": sorted(k.removeprefix("ignored:") for k in facts if k.startswith("ignored:")),
        "context_tokens": int(facts["context_tokens"]) if facts.get("context_tokens", "").isdigit() else None,
        "prompt_tokens_per_second": _number(facts.get("prompt_tps")),
        "generation_tokens_per_second": _number(facts.get("generation_tps")),
        # requests the server was seen to serve at once: None unknown, 1 one at a time
        "concurrency": int(facts["concurrency"]) if facts.get("concurrency", "").isdigit() else None,
        # replies the server began before one came whole (counted until one did), and the model
        # it says it serves when that is not the configured one
        "replies_begun": _count(facts.get("replies_begun")),
        "replies_completed": _count(facts.get("replies_completed")),
        "served_model": served_model(facts),
        "summary": summary,
    }


def _count(text: str | None) -> int:
    return int(text) if text and text.isdigit() else 0


def _number(text: str | None) -> float | None:
    try:
        value = float(text or "")
    except ValueError:
        return None
    return value if value > 0 else None


# --- drawing -------------------------------------------------------------------------------------


def _line(out: Console, *parts: tuple[str, str]) -> None:
    """One line of (text, style) parts; the text is never read as markup."""
    text = Text()
    for part, style in parts:
        text.append(part, style=style)
    out.print(text, soft_wrap=True)


def render_status(facts: dict[str, Any], out: Console) -> None:
    """Draw status_facts() for a terminal, one section after another."""
    _draw_queue(facts["queue"], facts["workers"], out)
    _draw_failures(facts["failed_last_hour"], facts["delivery"], out)
    votes = facts["feedback"]
    _line(
        out, ("feedback: ", "bold"), (f"{votes['up']} up, {votes['down']} down in {votes['days']} days", "")
    )
    _draw_repos(facts["repos"], out)
    _draw_webhooks(facts["webhooks"], out)
    _draw_model(facts["model"], out)
    _draw_today(facts["today"], out)


def _draw_queue(queue: dict[str, Any], workers: list[dict[str, Any]], out: Console) -> None:
    _line(out, ("queue: ", "bold"), (f"{queue['redis']}", ""))
    _line(
        out,
        ("  ", ""),
        (f"{queue['questions_waiting']} question(s) waiting, {queue['admin_jobs_waiting']} admin job(s)", ""),
    )
    _line(out, ("workers: ", "bold"), (f"{len(workers)} alive", ""))
    for worker in workers:
        state = f"busy with {worker['question']}" if worker["question"] else worker["state"]
        note = tool_threads_note(worker["tool_threads"])
        state += f"; {note}" if note else ""
        _line(out, (f"  {worker['name']}", "cyan"), (f" on {worker['host']}: {state}", ""))


def _draw_failures(failed: list[str], delivery: dict[str, Any], out: Console) -> None:
    """Questions that failed, and replies the outbox is still retrying or gave up on."""
    _line(out, ("failed: ", "bold"), (f"{len(failed)} question(s) in the last hour", "red" if failed else ""))
    if failed:
        _line(out, ("  references: " + ", ".join(failed[-5:]), "dim"))
    _line(
        out,
        ("delivery: ", "bold"),
        (f"{delivery['retrying']} retrying, {delivery['given_up_last_7_days']} given up in 7 days", ""),
    )
    for entry in delivery["shown"]:
        _line(
            out,
            (f"  {reference_id(entry['question_id'])} on {entry['platform']}: ", ""),
            (f"{entry['attempts']} attempt(s) in {short_duration(entry['age_seconds'])}; ", ""),
            (f"last error: {entry['error'] or '?'}", "dim"),
        )


def _draw_repos(repos: list[dict[str, Any]], out: Console) -> None:
    now = time.time()
    _line(out, ("repos:", "bold"))
    for repo in repos:
        if repo["sha"]:
            age = short_duration(now - repo["refreshed_at"]) if repo["refreshed_at"] else "?"
            where = f" on {repo['host']}" if repo["host"] else " on this machine"
            detail = f"commit {repo['sha'][:7]}, refreshed {age} ago{where}"
        else:
            detail = "never refreshed"
        parts = [(f"  {repo['name']}", "cyan"), (f": {detail}", "")]
        if repo["error"]:
            parts.append((f"; last error: {repo['error']}", "red"))
        _line(out, *parts)


def _draw_webhooks(webhooks: list[dict[str, Any]], out: Console) -> None:
    """Each forge's last delivery: when, its status and verdict, the repos it named."""
    _line(out, ("webhooks: ", "bold"), ("" if webhooks else "no delivery received", ""))
    for hook in webhooks:
        age = short_duration(hook["age_seconds"]) if hook["age_seconds"] is not None else "?"
        repos = f" ({hook['repos']})" if hook["repos"] else ""
        style = "red" if isinstance(hook["status"], int) and hook["status"] >= 400 else ""
        _line(
            out,
            (f"  {hook['forge']}", "cyan"),
            (f": {age} ago, {hook['status']} {hook['verdict']}{repos}", style),
            (f"; delivery {hook['delivery'] or '?'}", "dim"),
        )


def _draw_model(model: dict[str, Any], out: Console) -> None:
    """The configured model, every endpoint the workers learned about, and the latest errors."""
    _line(out, ("model: ", "bold"), (f"{model['model']} at {model['endpoint']}", ""))
    for endpoint in model["endpoints"]:
        style = "" if endpoint["reached"] else "yellow"
        _line(
            out, (f"  {endpoint['model']} at {endpoint['endpoint']}: ", "cyan"), (endpoint["summary"], style)
        )
    if model["errors"]:
        _line(out, ("  last model errors (newest first):", ""))
    for error in model["errors"]:
        status = f" (HTTP {error['status']})" if error["status"] else ""
        _line(
            out,
            (
                f"    {short_duration(error['age_seconds'])} ago, {error['ref']}: {error['kind']}{status}: ",
                "",
            ),
            (error["detail"] or "(no error text)", "dim"),
        )


def _draw_today(today: dict[str, Any], out: Console) -> None:
    budget = f" of {today['token_budget']} budget" if today["token_budget"] else ""
    cost = (
        f"${today['cost_usd']:.4f}"
        if today["cost_usd"] is not None
        else "cost unknown (set CODEBOT_MODEL_*_USD_PER_MILLION_TOKENS)"
    )
    _line(
        out,
        ("today (UTC): ", "bold"),
        (
            f"{today['questions']} {'question' if today['questions'] == 1 else 'questions'}, {today['tokens']} tokens{budget}, {cost}",
            "",
        ),
    )
