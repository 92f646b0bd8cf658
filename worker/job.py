"""Old RQ path: jobs queued before worker/ had subpackages name `worker.job.answer_question`
(and the callback `worker.job.on_question_failed`); RQ stores those dotted paths in Redis.
Kept so such jobs still run after an upgrade. The code is in worker/jobs/job.py."""

from worker.jobs.job import answer_question, on_question_failed

__all__ = ["answer_question", "on_question_failed"]
