"""A question's end: logged, counted and recorded, in one round trip after its delivery.

The metrics, the console's record of the question, the usage, and (for an answer this run
stored) the thread's turn and what feedback on the answer will be filed with are written in one
MULTI/EXEC. None of it decides what the asker sees: the final message was stored (and the
question marked answered) before. Redis going away just then (a restart, a failover) is waited
out as the start of a job is (`hold_on`, worker/jobs/reaper.py): the write is sent again once
Redis answers. The same MULTI sets a mark of this run's end (`codebot:ended:<id>:<run>`), so a
write that Redis applied but whose reply was lost is not applied twice: before sending again,
the run looks for its mark.
"""

from __future__ import annotations

import logging
from typing import Any

from redis import Redis
from redis.client import Pipeline
from redis.exceptions import RedisError

from config.settings import Settings
from worker.jobs.feedback import record_answer
from worker.jobs.outcomes import QuestionOutcome
from worker.jobs.question import Question, Turn
from worker.jobs.question_log import record_question
from worker.jobs.reaper import hold_on
from worker.jobs.sink import Answer
from worker.jobs.threads import record_turn
from worker.ops.accounting import record_usage
from worker.ops.metrics import count, observe_question

log = logging.getLogger("codebot.job")

ENDED_KEY_PREFIX = "codebot:ended:"  # + question id + ":" + run token: this run's end is written
ENDED_KEEP_SECONDS = 3600  # far longer than any outage a run waits out (reaper.HOLD_MAX_SECONDS)


def account_question(
    redis: Redis,
    settings: Settings,
    question: Question,
    outcome: QuestionOutcome,
    answered: Answer | None,
    run: str,
) -> None:
    """Log, count and account one finished question: the same facts everywhere, never its code.
    `answered`: the answer this run stored, if it stored one; `run`: the run's token."""
    log.log(
        logging.WARNING if outcome.status in ("failed", "not_an_answer", "cut_off") else logging.INFO,
        "question %s",
        outcome.status,
        extra=_log_fields(settings, question, outcome),
    )
    if outcome.status == "failed":
        count(redis, "codebot_failures_total", reason="crash" if outcome.reason == "crash" else "model")
    # the metrics, the console's record and the usage in one round trip: a worker with one
    # seat takes its next question only once this one has ended
    ended = f"{ENDED_KEY_PREFIX}{question.id}:{run}"
    attempts = 0

    def write() -> None:
        nonlocal attempts
        attempts += 1
        if attempts > 1 and redis.exists(ended):
            return  # the earlier attempt was applied; only its reply was lost
        with redis.pipeline() as pipe:
            _queue_end(redis, settings, question, outcome, answered, pipe)
            pipe.set(ended, 1, ex=ENDED_KEEP_SECONDS)
            pipe.execute()

    try:
        hold_on(f"question {question.id}'s end", write)
    except RedisError:  # only counts and context are lost: the answer was delivered (or is in the outbox)
        log.warning(
            "could not record the question's metrics, record, usage, thread turn and feedback context",
            extra={"job_id": question.id},
        )


def _queue_end(
    redis: Redis,
    settings: Settings,
    question: Question,
    outcome: QuestionOutcome,
    answered: Answer | None,
    pipe: Pipeline,
) -> None:
    """What a finished question writes, queued on `pipe`."""
    prompt, completion = outcome.prompt_tokens, outcome.completion_tokens
    observe_question(
        redis,
        question.target.platform,
        outcome.status,
        outcome.seconds,
        outcome.tools,
        (prompt, completion),
        into=pipe,
    )
    if outcome.status != "already_answered":  # a retry that found the answer stored adds nothing
        record_question(redis, settings, question, outcome.as_record(), into=pipe)
    if answered is not None:  # the turn and the feedback context of the answer this run stored
        turn = Turn(question=question.text, answer=answered.markdown)
        record_turn(redis, question.target, turn, into=pipe)
        record_answer(redis, settings, question, answered, outcome.snapshots, into=pipe)
    if prompt or completion:
        user_key = f"{question.target.platform}:{question.asker}"
        record_usage(redis, settings, user_key, prompt, completion, into=pipe)


def _log_fields(settings: Settings, question: Question, outcome: QuestionOutcome) -> dict[str, Any]:
    """The facts of a finished question's log line; its text only when log_question_text is on."""
    fields: dict[str, Any] = {
        "job_id": question.id,
        "ref": outcome.ref,
        "platform": question.target.platform,
        "channel": question.target.channel,
        "user": question.asker,
        "repos": ",".join(question.repos),
        "status": outcome.status,
        "delivery": outcome.delivery,
        "hops": outcome.hops,
        "tool_calls": outcome.tool_calls,
        "tools": outcome.tools,
        "prompt_tokens": outcome.prompt_tokens,
        "completion_tokens": outcome.completion_tokens,
        "unverified": outcome.unverified,
        "seconds": outcome.seconds,
    }
    if outcome.reason is not None:
        fields["reason"] = outcome.reason
    if outcome.failure_kind is not None:
        fields["failure_kind"] = outcome.failure_kind
    if settings.log_question_text:
        fields["question"] = question.text
    return fields
