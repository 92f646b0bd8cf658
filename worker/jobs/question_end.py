"""A question's end: logged, counted and recorded, in one round trip after its delivery.

The metrics, the console's record of the question, the usage, and (for an answer this run
stored) the thread's turn and what feedback on the answer will be filed with are written in one
pipeline. None of it decides what the asker sees: the final message was stored (and the
question marked answered) before, so losing this round trip loses only counts and context.
"""

from __future__ import annotations

import logging
from typing import Any

from redis import Redis
from redis.exceptions import RedisError

from config.settings import Settings
from worker.jobs.feedback import record_answer
from worker.jobs.outcomes import QuestionOutcome
from worker.jobs.question import Question, Turn
from worker.jobs.question_log import record_question
from worker.jobs.sink import Answer
from worker.jobs.threads import record_turn
from worker.ops.accounting import record_usage
from worker.ops.metrics import count, observe_question

log = logging.getLogger("codebot.job")


def account_question(
    redis: Redis, settings: Settings, question: Question, outcome: QuestionOutcome, answered: Answer | None
) -> None:
    """Log, count and account one finished question: the same facts everywhere, never its code.
    `answered`: the answer this run stored, if it stored one."""
    prompt, completion = outcome.prompt_tokens, outcome.completion_tokens
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
    pipe = redis.pipeline()
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
    try:
        pipe.execute()
    except RedisError:  # only counts and context are lost: the answer was delivered (or is in the outbox)
        log.warning(
            "could not record the question's metrics, record, usage, thread turn and feedback context",
            extra={"job_id": question.id},
        )


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
