"""The question job on RQ: a thin entry point, and the whole lifecycle in QuestionRun.run().

A failure of any kind ends in a clear message to the asker with a short reference id (the
details go to the log under the same id). Answering and delivering are two steps: the run's
final message (the answer or an apology) is stored first, under the question id, and only
then posted; a platform that refuses it gets it again later from the outbox
(worker/jobs/outbox.py). A retried job never stores or posts a second answer or apology.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from redis import Redis
from redis.exceptions import RedisError
from rq import get_current_job
from rq.job import Job

from worker.agent.citations import CheckedAnswer, check_answer, check_body
from worker.agent.endpoint_memory import base_url_of, display_url, record_model_error
from worker.agent.events import ProgressEvents
from worker.agent.live_text import LiveText
from worker.agent.loop import STUCK_KINDS, Agent, AgentResult, ModelFailure
from worker.jobs import outbox, texts
from worker.jobs import runtime as runtime_module
from worker.jobs.lane import DeferredEvents, Lane
from worker.jobs.live import ANSWERED_CHECK_SECONDS, LiveEvents, live_view
from worker.jobs.outbox import Final, make_sink
from worker.jobs.outcomes import (
    CUT_OFF_FAILURES,
    NO_CODE_READ_FAILURES,
    DeliveryState,
    QuestionOutcome,
    Status,
    cut_off_markdown,
    cut_off_text,
    no_code_read_failure,
    not_an_answer_text,
    stopped_markdown,
)
from worker.jobs.question import Question, ReplyTarget, reference_id
from worker.jobs.question_context import context_note, read_question_context
from worker.jobs.question_end import account_question
from worker.jobs.question_log import record_question
from worker.jobs.question_start import StartFacts, make_model_client, read_start
from worker.jobs.queue import was_answered
from worker.jobs.read_footer import with_read_footer
from worker.jobs.runtime import Runtime
from worker.jobs.sink import Answer, DeliveryFailed, ReplySink
from worker.jobs.threaded_worker import StopJobRequested, free_seat
from worker.ops.accounting import BUDGET_SPENT_MESSAGE, budget_spent
from worker.ops.claims import new_token
from worker.ops.logs import log_context
from worker.repos.refresh import catch_up
from worker.tools import make_context
from worker.tools.redact import get_redactor

log = logging.getLogger("codebot.job")

NO_SNAPSHOT_MESSAGE = (
    "None of the repositories for this question has been synced on this worker yet. "
    "An admin can run `codebot repos sync` (or `/codebot refresh all`)."
)
WORKER_STOPPED_MESSAGE = (
    "Sorry, the worker answering this stopped before it finished. Please ask again. Reference: `{ref}`"
)
TRYING_AGAIN = "the worker answering this stopped; trying again…"


# A final message ready while Redis restarts waits this long to be stored; after that it is
# posted without being stored (it might then repeat, which beats silence).
CLAIM_WAIT_SECONDS = 15.0


def answer_question(question_json: str) -> dict[str, Any]:
    """RQ entry point; RQ keeps the returned record as the job's result."""
    job = get_current_job()
    if job is None:
        raise RuntimeError("answer_question runs inside an RQ job")
    question = Question.model_validate_json(question_json)
    return QuestionRun(runtime_module.current(), job.connection, question).run().as_record()


class QuestionRun:
    def __init__(self, runtime: Runtime, redis: Redis, question: Question) -> None:
        self.runtime = runtime
        self.redis = redis
        self.question = question
        self.ref = reference_id(question.id)
        self.token = new_token()  # this run's claim on the question's one final message
        self.sink: ReplySink | None = None
        self.lane = Lane(f"codebot-lane-{self.ref}")  # the sink's 👀 and live view, off the model's path
        self.events = DeferredEvents()  # the agent's reports, held until the lane made the live view
        self.answered: Answer | None = None  # the answer this run stored, once it has
        self.answered_checked_at = float("-inf")  # when the answered marker was last seen absent
        self.start = StartFacts(answered=False)  # what the start read (read_start)

    def _outcome(self, status: Status, **facts: Any) -> QuestionOutcome:
        return QuestionOutcome(status=status, ref=self.ref, **facts)

    def run(self) -> QuestionOutcome:
        # whatever is logged while answering (a tool that crashed) carries the question's ids
        with log_context(job_id=self.question.id, ref=self.ref):
            try:
                return self._run()
            finally:  # also after a job timeout raised in the middle: the lane's thread ends
                self.lane.close()
                self.events.close()

    def _run(self) -> QuestionOutcome:
        question = self.question
        self.start = read_start(self.redis, self.runtime, question)  # one round trip
        if self.start.answered:  # stored by an earlier run: never answer twice,
            return self._outcome("already_answered", delivery=self._deliver_stored())  # but deliver it
        self.answered_checked_at = time.monotonic()  # progress lines check again from here on
        started = time.monotonic()
        try:  # everything, the sink and its 👀 included: whatever fails, the asker hears of it
            self.sink = make_sink(self.runtime, self.redis, question)
            self.lane.run(self.sink.received)  # the model is asked meanwhile (worker/jobs/lane.py)
            if budget_spent(self.redis, self.runtime.settings):
                outcome = self._outcome("budget_spent")
                final = Final(apology=BUDGET_SPENT_MESSAGE, outcome="budget_spent")
            else:
                outcome, final = self._answer(self.sink)
        except ModelFailure as exc:
            self._record_model_failure(exc)
            status: Status = "failed"
            said = str(exc)
            if exc.kind in NO_CODE_READ_FAILURES:  # no usable tool call at all: no code was read
                said = no_code_read_failure(exc.kind, exc.evidence, said, base_url_of(self.runtime.settings))
                status, apology = "not_an_answer", not_an_answer_text(None, self.ref, said)
            elif exc.kind in CUT_OFF_FAILURES:  # it says "cut off": counted so, and `codebot ask` exits so
                status, apology = "cut_off", texts.CUT_OFF_APOLOGY.format(failure=exc, ref=self.ref)
            else:
                apology = f"Sorry, I could not answer: {exc}. Reference: `{self.ref}`"
            final = Final(apology=apology, outcome=status)
            outcome = self._outcome(status, reason=said, **exc.accounting())
        except Exception:
            log.exception("question crashed", extra={"job_id": question.id, "ref": self.ref})
            final = Final(apology=f"Sorry, something went wrong while answering. Reference: `{self.ref}`")
            outcome = self._outcome("failed", reason="crash")
        self.lane.wait()  # 👀 and the progress message before the final message (a late lane: after all)
        self.lane.close()
        try:
            concluded = self.conclude(outcome, final)
        finally:
            self.events.close()  # the sink closed its live view if it delivered; else nothing more is shown
        return self._finish(concluded, started)

    def conclude(self, outcome: QuestionOutcome, final: Final) -> QuestionOutcome:
        """Store the final message as the question's one, then try to deliver it now; the
        outbox tries again later if the platform refuses it. A run that finds another final
        message stored (it was taken for dead and retried meanwhile) posts nothing."""
        try:
            stored = self._store(final)
        except RedisError as exc:
            log.error(
                "could not store the final message (%s); posting it unstored",
                exc,
                extra={"job_id": self.question.id, "ref": self.ref},
            )
            outcome.delivery = self._post_unstored(final)
            return outcome
        if not stored:
            return self._outcome("already_answered")
        if final.answer is not None:  # its thread turn and feedback context go with its record (_finish)
            self.answered = final.answer
        fresh = (self.question, final) if stored == outbox.STORED_NOW else None  # not read back
        try:
            outcome.delivery = outbox.deliver(
                self.redis, self.runtime, self.question.id, self.token, self.sink, stored=fresh
            )
        except RedisError as exc:  # stored and pending: the outbox delivers it once Redis answers
            log.warning("delivery left to the outbox: %s", exc, extra={"job_id": self.question.id})
            outcome.delivery = "pending"
        return outcome

    def _finish(self, outcome: QuestionOutcome, started: float) -> QuestionOutcome:
        free_seat()  # delivered or in the outbox: a threaded worker's seat takes the next question
        outcome.seconds = round(time.monotonic() - started, 3)
        account_question(self.redis, self.runtime.settings, self.question, outcome, self.answered, self.token)
        return outcome

    def _record_model_failure(self, exc: ModelFailure) -> None:
        """The server's own words, under the reference id: in the log and for `codebot status`.
        A tool call stuck in the kernel is no fault of the endpoint's: logged as what it is."""
        settings = self.runtime.settings
        if exc.kind in STUCK_KINDS:
            log.error("%s", exc, extra={"job_id": self.question.id, "ref": self.ref})
            return
        log.warning(
            "model endpoint failed kind=%s status=%s: %s",
            exc.kind,
            exc.status,
            exc.detail or "(no error text)",
            extra={"job_id": self.question.id, "ref": self.ref},
        )
        entry = {"ref": self.ref, "kind": exc.kind, "status": exc.status, "detail": exc.detail}
        endpoint = display_url(base_url_of(settings))
        record_model_error(self.redis, {**entry, "model": settings.model, "endpoint": endpoint})

    def _store(self, final: Final) -> int:
        """outbox.store, waiting out a Redis restart: a final message that is ready is not thrown away."""
        deadline = time.monotonic() + CLAIM_WAIT_SECONDS
        while True:
            try:
                return outbox.store(self.redis, self.runtime.settings, self.question, final, self.token)
            except RedisError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)

    def _post_unstored(self, final: Final) -> DeliveryState:
        """Redis is down: post without storing (a retry might post again, which beats silence)."""
        try:
            final.send(self.sink or make_sink(self.runtime, self.redis, self.question))
        except DeliveryFailed as exc:
            log.error("final message lost: %s", exc, extra={"job_id": self.question.id, "ref": self.ref})
            return "lost"
        return "direct"

    def _deliver_stored(self) -> DeliveryState:
        """An attempt at the stored final message, if it is due (a retried job whose first run died)."""
        try:
            return outbox.deliver(self.redis, self.runtime, self.question.id, new_token())
        except RedisError as exc:
            log.warning("stored final message not attempted: %s", exc, extra={"job_id": self.question.id})
            return "pending"

    def _progress(self, sink: ReplySink, method: str = "progress") -> Callable[[str], None]:
        """sink.progress (or the sink's `method`: `waiting`, for the line a console updates in
        place), silent once the question is answered: a run whose worker was taken for
        dead (a missed heartbeat) must not overwrite the answer its retry posted. Checked as the
        live view checks (worker/jobs/live.py): at most once per ANSWERED_CHECK_SECONDS, not a
        Redis round trip per tool call. A progress line echoes the model's arguments (a search
        pattern), so it is redacted like everything shown."""
        checked_at = self.answered_checked_at  # the run's start checked: the first line need not
        answered = False

        def report(text: str) -> None:
            nonlocal checked_at, answered
            now = time.monotonic()
            if not answered and now - checked_at >= ANSWERED_CHECK_SECONDS:
                checked_at = now
                with contextlib.suppress(RedisError):  # Redis down: the line is shown
                    answered = was_answered(self.redis, self.question.id)
            # after the 👀 and the progress message (at once on the lane itself); a line is a
            # courtesy: none while a late lane still uses the sink
            if not answered and self.lane.wait():
                getattr(sink, method)(get_redactor().redact(text))

        return report

    def _observe(
        self, sink: ReplySink, text: LiveText, redact: Callable[[str], str], progress: Callable[[str], None]
    ) -> None:
        """On the lane: the sink's live view, else the run's progress lines, is where the agent's
        reports go."""
        view = live_view(sink, text)
        if view is None:
            waiting = self._progress(sink, "waiting") if callable(getattr(sink, "waiting", None)) else None
            self.events.attach(ProgressEvents(progress, waiting))
            return

        def answered_elsewhere() -> bool:
            try:
                return was_answered(self.redis, self.question.id)
            except RedisError:
                return False

        self.events.attach(LiveEvents(view, text, redact, answered_elsewhere), view)

    def _answer(self, sink: ReplySink) -> tuple[QuestionOutcome, Final]:
        runtime = self.runtime
        # another machine may have refreshed a repo: fetch that commit first, bounded (worker/repos/refresh.py)
        progress = self._progress(sink)
        catch_up(
            runtime.mirrors, self.redis, self.question.repos, progress=progress, wanted=self.start.wanted
        )
        with runtime.mirrors.lease(self.question.repos) as snapshots:
            if not snapshots:
                return self._outcome("no_snapshot"), Final(apology=NO_SNAPSHOT_MESSAGE, outcome="no_snapshot")
            # the model reads the text; the repos the question names lead a search's results
            ctx = make_context(runtime.settings, snapshots, keep_data=False, question=self.question.text)
            client = make_model_client(runtime)
            text = LiveText(
                ctx.redact, lambda raw: check_body(ctx, raw).markdown, runtime.settings.stream_holdback_chars
            )
            # the agent starts meanwhile; the refresh's progress lines and the agent's are one
            # run of lines, with one answered check between them (`_progress`)
            self.lane.run(lambda: self._observe(sink, text, ctx.redact, progress))
            agent = Agent(
                runtime.settings,
                client,
                runtime.registry,
                ctx,
                events=self.events,
                redis=self.redis,
                endpoint_facts=self.start.endpoint,
            )
            context = read_question_context(runtime, self.question, ctx.redact)
            # the model gets the thread (or pasted log) with the question; what they point at is
            # read for it, the question's own links and frames first
            asked = self.question.model_copy(update={"text": context.before(self.question.text)})
            result = agent.run(asked, pointers_in=(self.question.text, context.text))
            if result.failure is not None:  # answered from what was found; admins still see why
                self._record_model_failure(result.failure)
            kind = result.outcome
            reply = cut_off_text(result.text) if kind == "cut_off" and not result.stopped else result.text
            checked = with_read_footer(self.redis, ctx, check_answer(ctx, ctx.redact(reply)))
        snapshot_shas = {name: snap.sha for name, snap in snapshots.items()}
        note = context_note(context)
        if note:  # the asker hears what the model did not read; the answer is still theirs
            checked = dataclasses.replace(checked, markdown=f"{note}\n\n{checked.markdown}")
        return self._answered(result, checked, snapshot_shas)

    def _answered(
        self, result: AgentResult, checked: CheckedAnswer, snapshot_shas: dict[str, str]
    ) -> tuple[QuestionOutcome, Final]:
        """The run's outcome and final message, from the agent's result and its checked answer."""
        kind = result.outcome
        markdown = checked.markdown
        if result.stopped:
            settings = self.runtime.settings
            markdown = stopped_markdown(
                markdown,
                result.stopped,
                self.ref,
                settings.question_deadline_seconds,
                settings.max_hops,
                result.advice,
            )
        elif kind == "cut_off":
            markdown = cut_off_markdown(markdown, self.ref)
        final = Final(
            answer=Answer(
                markdown=markdown,
                sources=checked.sources,
                unverified=checked.unverified,
                ref=self.ref,
                partial=result.partial,
                cut_off=kind == "cut_off",
            )
        )
        if kind == "not_an_answer":  # its prose is not passed on: the asker is told why
            final = Final(apology=not_an_answer_text(result, self.ref), outcome=kind)
            markdown = ""
        outcome = self._outcome(
            kind,
            reason="; ".join(result.failures) or None,
            answer=markdown,
            hops=result.hops,
            tool_calls=result.tool_calls,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            verified=len(checked.sources),
            unverified=checked.unverified,
            partial=result.partial,
            stop_reason=result.stop_reason,
            tools=dict(result.tool_names),
            snapshots=snapshot_shas,
            trace=result.trace,
        )
        return outcome, final


def question_of(job: Job) -> Question:
    """The question a job answers: its argument, else (a job whose data cannot be read) what its
    meta keeps, enough to reach the asker."""
    try:
        return Question.model_validate_json(job.args[0])
    except Exception:
        target = ReplyTarget.model_validate(job.meta["target"])
        return Question(id=job.id, asker=str(job.meta.get("asker", "")), target=target, text="", repos=[])


def on_question_failed(job: Job, connection: Redis, *exc_info: Any) -> None:
    """RQ failure callback: a timeout, or a worker that died mid-question (abandoned job).

    RQ retries once when retries are left; the asker hears of it only when none is. A final
    message the dead run stored is handed over: delivered by whoever tries next, at once.
    """
    if "target" not in job.meta or not job.id.startswith("q-"):
        return  # not a question (e.g. an admin job): nobody is waiting in a thread
    try:
        question = question_of(job)
        runtime = runtime_module.current()
        if was_answered(connection, job.id):
            outbox.hand_over(connection, job.id)
            return
        stopped = len(exc_info) > 1 and isinstance(exc_info[1], StopJobRequested)  # `rq` stop-job
        if job.retries_left and not stopped:
            make_sink(runtime, connection, question).progress(TRYING_AGAIN)
            return
        run = QuestionRun(runtime, connection, question)
        final = Final(apology=WORKER_STOPPED_MESSAGE.format(ref=run.ref))
        outcome = run.conclude(run._outcome("failed", reason="worker stopped"), final)
        if outcome.status != "already_answered":
            record_question(connection, runtime.settings, question, outcome.as_record())
    except Exception:
        log.exception("failure callback could not tell the asker job=%s", job.id)
