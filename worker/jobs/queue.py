"""The RQ queues and how a question gets onto one, exactly once.

Named constants carry their unit. A question's job id comes from the platform's message
identity and is enqueued with `unique=True`, so a duplicate delivery raises DuplicateJobError
instead of creating a second job (docs/platform-notes.md §3, pitfall 3).
"""

from __future__ import annotations

from dataclasses import dataclass

from redis import Redis
from rq import Callback, Queue, Retry
from rq.exceptions import DuplicateJobError
from rq.job import Job, JobStatus

from config.settings import Settings
from worker.jobs.question import Question

QUESTIONS_QUEUE = "codebot-questions"
ADMIN_QUEUE = "codebot-admin"
# + question id -> the token of the run that stored its final message (worker/jobs/outbox.py)
ANSWERED_KEY_PREFIX = "codebot:answered:"
ANSWERED_TTL_SECONDS = 7 * 24 * 3600
QUESTION_RESULT_TTL_SECONDS = 24 * 3600  # a finished job id keeps blocking duplicates this long
QUESTION_FAILURE_TTL_SECONDS = 7 * 24 * 3600
# No queued-time TTL: a question waiting for a worker is answered late rather than
# dropped without a word (RQ drops expired jobs silently); `queue_max_depth` bounds the backlog.

# RQ retries a job once when its worker died mid-question (the failure callback tells the
# asker only when no retry is left).
QUESTION_RETRIES = 1


def job_timeout_seconds(settings: Settings) -> int:
    """Longer than anything the agent can spend, so the agent's own deadline always fires first:
    the question deadline, plus one model call that started just before it, plus posting."""
    worst_call = settings.model_timeout_seconds * (settings.model_max_retries + 1)
    return int(settings.question_deadline_seconds + worst_call + 60)


@dataclass(frozen=True)
class Enqueued:
    job_id: str
    duplicate: bool  # True: this message was already queued or answered; nothing new was created
    position: int  # questions ahead of it in the queue (0 for a duplicate)


def questions_queue(redis: Redis) -> Queue:
    return Queue(QUESTIONS_QUEUE, connection=redis)


def enqueue_question(redis: Redis, question: Question, settings: Settings) -> Enqueued:
    queue = questions_queue(redis)
    try:
        queue.enqueue_call(
            "worker.jobs.job.answer_question",
            args=(question.model_dump_json(),),
            job_id=question.id,
            unique=True,
            timeout=job_timeout_seconds(settings),
            result_ttl=QUESTION_RESULT_TTL_SECONDS,
            failure_ttl=QUESTION_FAILURE_TTL_SECONDS,
            # a retried question has waited longest: it goes to the front, not behind the queue
            retry=Retry(max=QUESTION_RETRIES, enqueue_at_front=True),
            # kept in meta so a failure callback can tell the asker without the job's args
            meta={"target": question.target.model_dump(), "asker": question.asker},
            on_failure=Callback("worker.jobs.job.on_question_failed"),
            description=f"question {question.id}",
        )
    except DuplicateJobError:
        return Enqueued(question.id, duplicate=True, position=0)
    return Enqueued(question.id, duplicate=False, position=max(queue.count - 1, 0))


def is_pending(redis: Redis, job_id: str) -> bool:
    """Is this job waiting in a queue or running now (not finished, failed or gone)?"""
    job = Job.fetch_many([job_id], connection=redis)[0]
    return job is not None and job.get_status(refresh=False) in (JobStatus.QUEUED, JobStatus.STARTED)


def queue_depth(redis: Redis) -> int:
    return questions_queue(redis).count


def was_answered(redis: Redis, question_id: str) -> bool:
    """Is the question's final message stored (worker/jobs/outbox.py), delivered or not?"""
    return bool(redis.exists(ANSWERED_KEY_PREFIX + question_id))
