"""The recent questions, one record each, for the operators' console (`codebot web`, bot/web/).

Each finished run of a question adds one JSON record to a capped Redis list
(`codebot:questions:recent`, the newest first, at most QUESTIONS_KEPT): where it was asked, the
repos, the outcome, the time it took, the tools it called and the trace of those calls (one
line each, as the agent logged them), tokens, and the question's text only when
`feedback_keep_question_text` allows it. The answer is never kept here (it is in the outbox and
the thread). A record is the job's own `QuestionOutcome.as_record()` plus the question's
facts, so fields a later release adds to the outcome (e.g. an outcome kind) arrive as they are;
readers take what they know and show the rest as it is.

Bounded: the list is trimmed on every write and expires QUESTIONS_KEPT_SECONDS after the last.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from redis import Redis
from redis.client import Pipeline
from redis.exceptions import RedisError

from config.settings import Settings
from worker.history.events import append_event
from worker.jobs.question import Question
from worker.ops.json_list import json_objects

log = logging.getLogger("codebot.question_log")

QUESTIONS_KEY = "codebot:questions:recent"
QUESTIONS_KEPT = 2000
QUESTIONS_KEPT_SECONDS = 40 * 86400
TRACE_KEPT_LINES = 100  # a question's tool calls are bounded by max_hops x max_tool_calls_per_turn
TRACE_LINE_CHARS = 500
LEFT_OUT = ("answer",)  # the answer may quote code at length: the thread and the outbox hold it


def record_question(
    redis: Redis,
    settings: Settings,
    question: Question,
    outcome: dict[str, Any],
    into: Pipeline | None = None,
) -> None:
    """Keep one finished run's record; a Redis failure only loses it from the console. `into`:
    queued in a caller's pipeline, whose caller sends it and meets any failure."""
    facts = {key: value for key, value in outcome.items() if key not in LEFT_OUT}
    facts["trace"] = [str(line)[:TRACE_LINE_CHARS] for line in facts.get("trace", [])[:TRACE_KEPT_LINES]]
    target = question.target
    facts.update(
        id=question.id,
        at=round(time.time(), 3),
        asked_at=question.created_at,
        platform=target.platform,
        channel=target.channel,
        thread=target.thread or "",
        message=target.message or "",
        guild=target.guild or "",
        team=target.team or "",
        asker=question.asker,
        repos=list(question.repos),
        follow_up=bool(question.history),
        question=question.text if settings.feedback_keep_question_text else "",
    )
    try:
        pipe = into if into is not None else redis.pipeline()
        pipe.lpush(QUESTIONS_KEY, json.dumps(facts, default=str))
        pipe.ltrim(QUESTIONS_KEY, 0, QUESTIONS_KEPT - 1)
        pipe.expire(QUESTIONS_KEY, QUESTIONS_KEPT_SECONDS)
        append_event(redis, "question", facts, into=pipe)  # the same facts, for the history's database
        if into is None:
            pipe.execute()
    except RedisError:
        log.warning("could not keep the question's record for the console", extra={"job_id": question.id})


def recent_questions(redis: Redis, limit: int = QUESTIONS_KEPT) -> list[dict[str, Any]]:
    """The kept records, newest first; a record that is not a JSON object is skipped."""
    return json_objects(redis, QUESTIONS_KEY, limit)
