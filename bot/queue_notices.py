"""A queue you can see: a question waiting longer than `queue_notice_after_seconds` gets a
placeholder saying so, with its place in the queue, kept up to date within the platform's limits.

The chat adapter does this, not a worker: the point is a backlog, when every worker is busy (or
none runs yet). Each adapter process runs `QueueNotices.run` in a thread; every
`CHECK_SECONDS` it reads the questions queue in order and, for each of its platform's
questions that has waited long enough and whose place changed since it was last shown, has the
platform's sink show `texts.waiting(ahead)` in the question's placeholder (Slack: the message
the answer later replaces; Discord: the progress message in the answer's thread). Limits:

- one placeholder is edited at most once per `queue_notice_update_seconds`, across every
  adapter process (a token claim per question, worker/ops/claims.py), and only when its place
  changed;
- each process edits at most `MAX_EDITS_PER_MINUTE` placeholders a minute, front of the queue
  first (chat.update is Tier 3, about 50 a minute per workspace; Discord: 5 edits per 5 s per
  channel);
- a question a worker has started is never shown as waiting: its status is read again right
  before the edit, and the sinks record the placeholder with a claim, so a notice and a
  worker's own placeholder posted at once end as one message (the other is deleted).

When a worker starts the question, its sink's `received()` replaces the notice with the usual
"looking into the code" (`WAITING_KEY_PREFIX` tells the Slack sink the placeholder is a notice).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

from pydantic import ValidationError
from redis import Redis
from rq.job import Job, JobStatus

from bot import texts
from config.settings import Settings
from worker.jobs.question import Question
from worker.jobs.queue import questions_queue
from worker.ops.claims import claim, new_token

log = logging.getLogger("codebot.queue_notices")

WAITING_KEY_PREFIX = "codebot:waiting:"  # + question id -> the place last shown (questions ahead)
EDIT_CLAIM_PREFIX = "codebot:waiting:edit:"  # + question id: one edit per update interval
WAITING_TTL_SECONDS = 24 * 3600
CHECK_SECONDS = 2.0
MAX_EDITS_PER_MINUTE = 40
ShowWaiting = Callable[[Question, str], None]  # the platform's sink: show this text in the placeholder


class QueueNotices:
    """One adapter process's notices for the questions of `platform`."""

    def __init__(
        self, settings: Settings, redis: Callable[[], Redis], platform: str, show: ShowWaiting
    ) -> None:
        self.settings = settings
        self.redis = redis
        self.platform = platform
        self.show = show
        self._edits: collections.deque[float] = collections.deque()  # when, over the last minute

    def pass_once(self, now: float | None = None) -> list[tuple[str, int]]:
        """Show or update every notice that is due; (question id, questions ahead) of each shown."""
        now = time.time() if now is None else now
        redis = self.redis()
        ids = questions_queue(redis).get_job_ids()
        shown: list[tuple[str, int]] = []
        for ahead, job in enumerate(Job.fetch_many(ids, connection=redis)):
            if job is None or not self._budget_left(now):
                continue
            question = _question(job)
            if question is None or question.target.platform != self.platform:
                continue
            if now - question.created_at < self.settings.queue_notice_after_seconds:
                continue
            if _last_shown(redis, question.id) == ahead or not self._claim_edit(redis, question.id):
                continue
            if job.get_status(refresh=True) != JobStatus.QUEUED:
                continue  # a worker took it meanwhile: its own placeholder says so
            self.show(question, texts.waiting(ahead))
            redis.set(WAITING_KEY_PREFIX + question.id, ahead, ex=WAITING_TTL_SECONDS)
            self._edits.append(now)
            shown.append((question.id, ahead))
        return shown

    def run(self, stop: threading.Event) -> None:
        """Passes every CHECK_SECONDS until `stop`; a failing pass is logged and the next tries again."""
        while not stop.wait(CHECK_SECONDS):
            try:
                self.pass_once()
            except Exception as exc:  # Redis restarting, the platform down: the next pass tries again
                log.warning("queue notices (%s) failed: %s", self.platform, exc)

    def start(self) -> threading.Event:
        """`run` in a daemon thread; set the returned event to stop it."""
        stop = threading.Event()
        threading.Thread(
            target=self.run, args=(stop,), name=f"queue-notices-{self.platform}", daemon=True
        ).start()
        return stop

    def _budget_left(self, now: float) -> bool:
        while self._edits and now - self._edits[0] > 60:
            self._edits.popleft()
        return len(self._edits) < MAX_EDITS_PER_MINUTE

    def _claim_edit(self, redis: Redis, question_id: str) -> bool:
        seconds = max(self.settings.queue_notice_update_seconds, 0.001)
        return claim(redis, EDIT_CLAIM_PREFIX + question_id, new_token(), seconds)


def is_waiting_notice(redis: Redis, question_id: str) -> bool:
    """Does the question's placeholder show a waiting notice (the sink then replaces it)?"""
    return bool(redis.exists(WAITING_KEY_PREFIX + question_id))


def notice_replaced(redis: Redis, question_id: str) -> None:
    redis.delete(WAITING_KEY_PREFIX + question_id)


def _last_shown(redis: Redis, question_id: str) -> int | None:
    raw = redis.get(WAITING_KEY_PREFIX + question_id)
    return int(raw) if raw is not None else None


def _question(job: Job) -> Question | None:
    try:
        return Question.model_validate_json(job.args[0])
    except (ValidationError, IndexError, TypeError):
        return None  # an admin job, or one queued by another release: no notice
