"""The LLM tool loop: the model may only search, list and read through the tool registry.

Budgets keep a question bounded whatever the model does: a hop limit after which the model
must answer from what it has, budget notes appended to tool results as the limit nears, a
per-question deadline that bounds every model call and every tool call (a turn that begins
with too little time left runs none of its calls; a search stops at it), a cap on the tool calls
of one turn (the extras get an error result the model can read), and a context budget
(worker/agent/context.py). Every tool call gets exactly one tool reply. The calls of one turn
run at the same time, their results kept in the model's order (worker/agent/tool_round.py).

An answer comes from code the run read: at least one successful tool call on the repos in
scope (`AgentResult.read_code`; every tool reads only those). A text reply before any code was read gets the tool requirement once
more (an instruction, with tool_choice="required" where the endpoint takes it); a run that still
read no code ends as `not_an_answer` (its prose is not shown), or, with no text at all, as a
failure saying so; never as a "found nothing" answer. A final text whose reply was cut off (a
stream without a finish reason, or the output limit) is `cut_off`. The model side (request
shape, streaming, fallbacks, retries, errors) is worker/agent/model.py; what happens is reported
through worker/agent/events.py, a failed call as failed (worker/agent/progress_lines.py).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import openai
from redis import Redis

from config.settings import Settings
from worker.agent.asked import AskedQuestion
from worker.agent.endpoint_memory import TOOL_CHOICE_NONE, EndpointMemory
from worker.agent.events import AgentEvents, NoEvents, ProgressEvents, SafeEvents
from worker.agent.model import ModelClient, ModelTurn, ToolCall, retry_wait_seconds
from worker.agent.model_errors import DEADLINE_HELP, ModelFailure, failure
from worker.agent.progress_lines import (
    call_subject,
    describe_call,
    failed_line,
    preview_arguments,
    sure_failure,
)
from worker.agent.prompt import build_system_prompt
from worker.agent.tool_pool import ToolStuck
from worker.agent.tool_round import ToolRound, start_order
from worker.agent.turn_messages import assistant_message, evidence_summary
from worker.pointers import read_pointers
from worker.tools.context import ToolContext, repos_in_scope
from worker.tools.registry import ToolOutcome, ToolRegistry

__all__ = ["Agent", "AgentResult", "ModelFailure", "describe_call", "evidence_summary", "retry_wait_seconds"]

log = logging.getLogger("codebot.agent")

FINAL_INSTRUCTION = (
    "Your research budget is used up: no more tools are available. Answer the question now, "
    "from what the tools showed you, citing lines as [repo:path#Lx-Ly]. Say what you could not verify."
)
ANSWER_PLEASE = "Please answer the question, citing lines."
READ_CODE_FIRST = (
    "You have not read any code yet, and an answer must come from the code. Use the tools now "
    "to find and read the code that answers the question, in the repos in scope: {repos}. "
    "Then answer, citing lines as [repo:path#Lx-Ly]."
)
SKIPPED_OVER_CAP = "Error: not run: at most {cap} tool calls run per turn. Call it again in your next turn if you still need it."
SKIPPED_AT_DEADLINE = "Error: not run: the time for this question is up. Answer from what you have."
WHY_STUCK = "it did not return in time"
MIN_CALL_SECONDS = 2.0  # below this much time left, a model call or a tool call is not worth starting
STUCK_KINDS = frozenset({"tool_stuck", "tool_not_started"})  # a tool call hung, not the model
FAILURES_KEPT = 3  # why calls failed, for the asker's reply


@dataclass(frozen=True)
class _Started:
    """A tool call on its way: its slot in the round, and what is shown of it."""

    slot: int
    preview: dict[str, Any]
    description: str
    why: str  # why it is sure to fail ("" if it is not)
    line: str  # its progress line
    subject: str  # what it works on, for a line naming it if it hangs


@dataclass
class AgentResult:
    text: str
    hops: int = 0
    tool_calls: int = 0  # tool calls that ran
    usable_tool_calls: int = 0  # ... and returned a result rather than an error
    prompt_tokens: int = 0
    completion_tokens: int = 0
    partial: bool = False  # the answer was forced by a budget or built from evidence after a failure
    stop_reason: str = "answered"  # answered | hop_limit | deadline | model_failed | tool_stuck
    trace: list[str] = field(default_factory=list)  # one line per tool call, for logs and eval
    tool_names: Counter[str] = field(default_factory=Counter)  # calls per tool, for metrics
    failure: ModelFailure | None = None  # what stopped the model, when the answer was built without it
    cut_off: bool = False  # the final text's reply was cut off before the model finished it
    reasked: bool = False  # a text reply before any code was read got the tool requirement again
    pointers: int = 0  # links and frames in the question read (lines shown) before the first request
    failures: list[str] = field(default_factory=list)  # why calls failed ("no repo `acme`"), a few
    stuck: ModelFailure | None = None  # the first call given up at the deadline (worker/agent/tool_pool.py)
    # Why the run was stopped before the model wrote an answer (deadline | hop_limit |
    # model_failed): what it shows is what was found, never an answer, so never ✅.
    stopped: str = ""
    advice: str = ""  # stopped by the deadline: setting values that fit the measured speeds (time_advice.py)

    @property
    def read_code(self) -> bool:
        """A tool read the repos in scope for this run (a successful call: every tool reads them),
        the model's or codebot's own for what the question points at."""
        return self.usable_tool_calls > 0 or self.pointers > 0

    @property
    def outcome(self) -> Literal["answered", "not_an_answer", "cut_off"]:
        """answered (from code it read) | not_an_answer (no code read) | cut_off"""
        if not self.read_code:
            return "not_an_answer"
        return "cut_off" if self.cut_off or self.stopped else "answered"


class Agent:
    def __init__(
        self,
        settings: Settings,
        client: openai.OpenAI,
        registry: ToolRegistry,
        ctx: ToolContext,
        progress: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        *,
        events: AgentEvents | None = None,
        redis: Redis | None = None,
        log_extra: dict[str, Any] | None = None,
        endpoint_facts: dict[bytes, bytes] | None = None,
    ) -> None:
        """`events` observes the run (worker/agent/events.py); `progress` is the older one-line
        callback, adapted. `redis` shares what endpoints accept across workers (optional);
        `endpoint_facts`: the endpoint's hash in it, if the caller has just read it."""
        self.settings = settings
        self.registry = registry
        self.ctx = ctx
        self.clock = clock
        observer = events or (ProgressEvents(progress) if progress is not None else NoEvents())
        self.events = SafeEvents(observer)
        self.memory = EndpointMemory(settings, redis, endpoint_facts)
        self.model = ModelClient(settings, client, self.memory, self.events, clock, log_extra)

    # --- the loop --------------------------------------------------------------------------
    def run(self, question: AskedQuestion, pointers_in: Sequence[str] | None = None) -> AgentResult:
        """Answer `question`. `pointers_in`: the texts whose links and stack-trace frames codebot
        reads for the model first, in rank order (the question's own words, then the thread or
        log it was asked with); default: the question's text."""
        deadline = self.clock() + self.settings.question_deadline_seconds
        result = AgentResult(text="")
        pointed_from = [question.text] if pointers_in is None else list(pointers_in)
        messages = self._opening_messages(question, result, deadline, pointed_from)
        question_at = len(messages) - 1
        default_repo = next(iter(self.ctx.snapshots)) if len(self.ctx.snapshots) == 1 else None
        schemas = self.registry.schemas()
        require_tools = self.settings.tool_choice_required  # the first turn, and a re-ask
        try:
            for hop in range(self.settings.max_hops):
                if deadline - self.clock() < MIN_CALL_SECONDS:
                    result.stop_reason = "deadline"
                    break
                choice = "required" if require_tools else "auto"
                turn = self.model.complete(
                    messages, question_at, tools=schemas, tool_choice=choice, deadline=deadline
                )
                result.hops = hop + 1
                require_tools = False
                if not turn.tool_calls:
                    if turn.content.strip() and not result.read_code and not result.reasked:
                        # the tool requirement once more: an instruction any endpoint takes, and
                        # tool_choice="required" unless the endpoint refused it (model.py)
                        result.reasked = True
                        require_tools = self.settings.tool_choice_required
                        messages.append({"role": "assistant", "content": turn.content})
                        messages.append({"role": "user", "content": self._read_code_first()})
                        continue
                    if turn.content.strip():
                        return self._final_text(result, turn)
                    messages.append({"role": "user", "content": ANSWER_PLEASE})
                    continue
                messages.append(assistant_message(turn))
                if not self._run_tool_calls(turn.tool_calls, hop, result, default_repo, deadline, messages):
                    result.stop_reason = "deadline"
                    break
            else:
                result.stop_reason = "hop_limit"
            return self._forced_answer(messages, question_at, schemas, result, deadline)
        except ModelFailure as exc:
            # Only the model's failures: anything else is a bug of ours, raised for the job to
            # log with its traceback and to answer as a crash with a reference.
            return self._after_failure(exc, result)

    def _read_code_first(self) -> str:
        return READ_CODE_FIRST.format(repos=repos_in_scope(self.ctx.snapshots))

    def _final_text(self, result: AgentResult, turn: ModelTurn) -> AgentResult:
        result.text = turn.content
        result.cut_off = turn.cut_off or turn.finish_reason == "length"
        return self._finish(result, from_model=True)

    def _opening_messages(
        self, question: AskedQuestion, result: AgentResult, deadline: float, pointed_from: list[str]
    ) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": build_system_prompt(self.ctx.snapshots)}
        ]
        turns = (
            question.history[-self.settings.history_max_turns :] if self.settings.history_max_turns else []
        )
        # Adapters redact questions already; this is the last line of defence for anything
        # (old thread memory, a new intake) that did not.
        for turn in turns:
            messages.append({"role": "user", "content": self.ctx.redact(turn.question)})
            messages.append({"role": "assistant", "content": self.ctx.redact(turn.answer)})
        # what the question links to and its stack trace's frames, read through the tools
        self.ctx.deadline = time.monotonic() + (deadline - self.clock())
        pointed, pointers = read_pointers(pointed_from, self.ctx, self.registry)
        result.pointers = sum(p.read for p in pointers)
        result.trace += [f"pointer {p.kind} {p.reference}" for p in pointers]
        if pointed:  # before the question: the context fitter drops it before the question
            messages.append({"role": "user", "content": self.ctx.redact(pointed)})
        messages.append({"role": "user", "content": self.ctx.redact(question.text)})
        return messages

    def _run_tool_calls(
        self,
        calls: list[ToolCall],
        hop: int,
        result: AgentResult,
        default_repo: str | None,
        deadline: float,
        messages: list[dict[str, Any]],
    ) -> bool:
        """Run one turn's calls at the same time (worker/agent/tool_round.py), each answered, the
        results in the model's order; False when the deadline stopped them."""
        cap = self.settings.max_tool_calls_per_turn
        in_time = deadline - self.clock() >= MIN_CALL_SECONDS
        # tool work (a search) stops at the question's deadline, told in time.monotonic() terms
        self.ctx.deadline = time.monotonic() + (deadline - self.clock())
        tool_round: ToolRound[ToolOutcome] = ToolRound(self.ctx.deadline)
        started: list[_Started | str] = []
        for index, call in enumerate(calls):
            if index >= cap:
                started.append(SKIPPED_OVER_CAP.format(cap=cap))
                result.trace.append(f"{call.name} -> skipped (over {cap} calls in one turn)")
            elif not in_time:
                started.append(SKIPPED_AT_DEADLINE)
                result.trace.append(f"{call.name} -> skipped (deadline)")
            else:
                started.append("")  # started below, in start_order
        for index in start_order([call.name for call in calls]):
            if started[index] == "":
                started[index] = self._start_tool_call(tool_round, calls[index], default_repo)
        for entry, call in zip(started, calls, strict=True):  # shown once all are on their way
            if isinstance(entry, _Started):
                self.events.tool_started(call.id, call.name, entry.preview, entry.line)
        for entry, call in zip(started, calls, strict=True):
            content = (
                entry if isinstance(entry, str) else self._finish_tool_call(tool_round, entry, call, result)
            )
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": content + self._budget_note(hop)}
            )
        if result.stuck is not None:  # the time is up, and the asker hears what hung
            raise result.stuck
        return in_time

    def _start_tool_call(
        self, tool_round: ToolRound[ToolOutcome], call: ToolCall, default_repo: str | None
    ) -> _Started:
        preview = preview_arguments(call.arguments)
        description = describe_call(call.name, preview, default_repo)
        why = sure_failure(call.name, preview, self.ctx.snapshots, self.registry.tools)
        key = json.dumps([call.name, call.arguments])

        def run() -> ToolOutcome:
            return self.registry.call(self.ctx, call.name, call.arguments)

        slot = tool_round.start(key, run)
        line = failed_line(description, why) if why else description
        return _Started(slot, preview, description, why, line, call_subject(call.name, preview, default_repo))

    def _finish_tool_call(
        self, tool_round: ToolRound[ToolOutcome], started: _Started, call: ToolCall, result: AgentResult
    ) -> str:
        why = started.why
        try:
            outcome = tool_round.result(started.slot)
        except ToolStuck as exc:
            outcome, why = ToolOutcome(call.name, started.preview, False, f"Error: {WHY_STUCK}"), WHY_STUCK
            if result.stuck is None:
                kind = "tool_stuck" if exc.started else "tool_not_started"
                seconds = self.settings.question_deadline_seconds
                result.stuck = failure(
                    kind, f"{call.name} given up at the deadline", what=started.subject, seconds=seconds
                )
        self.events.tool_finished(
            call.id, outcome.ok, "" if outcome.ok else failed_line(started.description, why)
        )
        result.tool_calls += 1
        result.usable_tool_calls += int(outcome.ok)
        if not outcome.ok and why and why not in result.failures and len(result.failures) < FAILURES_KEPT:
            result.failures.append(why)
        result.tool_names[call.name if call.name in self.registry.tools else "unknown"] += 1
        result.trace.append(
            f"{call.name} {json.dumps(outcome.arguments)[:200]} -> {'ok' if outcome.ok else 'error'}"
        )
        return outcome.text

    def _budget_note(self, hop: int) -> str:
        left = self.settings.max_hops - hop - 1
        if left > self.settings.budget_warning_hops:
            return ""
        if left == 0:
            return "\n\n[budget: that was your last tool round. Next, write the answer.]"
        return f"\n\n[budget: {left} tool round(s) left. Start concluding.]"

    def _forced_answer(
        self,
        messages: list[dict[str, Any]],
        question_at: int,
        schemas: list[dict[str, Any]],
        result: AgentResult,
        deadline: float,
    ) -> AgentResult:
        """No more tool rounds: the model must answer from what it has. The tools stay listed
        with tool_choice="none" (strict routes refuse tool history without tools), or, where
        that is refused or ignored, the tool history is folded into text."""
        result.partial = True
        if deadline - self.clock() >= MIN_CALL_SECONDS:
            messages.append({"role": "user", "content": FINAL_INSTRUCTION})
            turn = self._final_turn(messages, question_at, schemas, deadline)
            if turn is not None and turn.content.strip():
                return self._final_text(result, turn)
        result.text = evidence_summary(self.ctx)
        result.stopped = result.stop_reason
        if result.stopped == "deadline":
            result.advice = self.model.time_advice()
        return self._finish(result, from_model=False)

    def _final_turn(
        self, messages: list[dict[str, Any]], question_at: int, schemas: list[dict[str, Any]], deadline: float
    ) -> ModelTurn | None:
        turn = self.model.complete(
            messages, question_at, tools=schemas, tool_choice="none", deadline=deadline
        )
        if turn.tool_calls and not turn.content.strip() and not self.memory.refuses(TOOL_CHOICE_NONE):
            self.memory.refuse(TOOL_CHOICE_NONE, "it called tools when asked to call none")
            if deadline - self.clock() < MIN_CALL_SECONDS:
                return None
            turn = self.model.complete(
                messages, question_at, tools=schemas, tool_choice="none", deadline=deadline
            )
        return turn

    def _finish(self, result: AgentResult, from_model: bool) -> AgentResult:
        result.prompt_tokens = self.model.prompt_tokens
        result.completion_tokens = self.model.completion_tokens
        if result.usable_tool_calls == 0 and not from_model:
            detail = f"{result.hops} model turn(s), {result.tool_calls} tool call(s), none usable"
            if result.stop_reason == "deadline":
                exc = failure("deadline", detail, seconds=self.settings.question_deadline_seconds)
                exc.args = (f"{exc}: {self.model.time_advice() or DEADLINE_HELP}",)
            else:
                exc = failure("no_tool_calls", detail)
            raise self._with_stats(exc, result)
        return result

    def _with_stats(self, exc: ModelFailure, result: AgentResult) -> ModelFailure:
        exc.prompt_tokens, exc.completion_tokens = self.model.prompt_tokens, self.model.completion_tokens
        exc.hops, exc.tool_calls, exc.tools = result.hops, result.tool_calls, result.tool_names
        return exc

    def _after_failure(self, exc: ModelFailure, result: AgentResult) -> AgentResult:
        """Best answer from what was found, or ModelFailure when nothing was."""
        stuck = exc.kind in STUCK_KINDS
        result.stop_reason = "tool_stuck" if stuck else "model_failed"
        result.partial = True
        result.failure = self._with_stats(exc, result)
        result.prompt_tokens = self.model.prompt_tokens
        result.completion_tokens = self.model.completion_tokens
        if not self.ctx.shown.files():
            raise exc
        result.text = f"I could not finish answering: {exc}.\n\n" + evidence_summary(self.ctx)
        result.stopped = result.stop_reason
        return result
