"""The LLM tool loop: the model may only search, list and read through the tool registry.

Budgets keep a question bounded whatever the model does: a hop limit after which tools are
withdrawn and the model must answer from what it has, budget notes appended to tool results
as the limit nears, a per-question deadline that also bounds each model call, and a context
budget that trims the oldest tool output first. Every tool call gets exactly one tool reply.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import openai

from config.settings import Settings
from worker.agent.asked import AskedQuestion
from worker.agent.prompt import build_system_prompt
from worker.tools.context import ToolContext
from worker.tools.registry import ToolRegistry

FINAL_INSTRUCTION = (
    "Your research budget is used up: no more tools are available. Answer the question now, "
    "from what the tools showed you, citing lines as [repo:path#Lx-Ly]. Say what you could not verify."
)
TRIMMED_NOTICE = "[earlier tool output trimmed to fit the context budget; call the tool again if you need it]"
MIN_CALL_SECONDS = 2.0  # below this much time left, a model call is not worth starting
ARGUMENT_PREVIEW_CHARS = 60


class UnusableReply(ValueError):
    """The model endpoint answered with something that is not a usable chat completion."""


class ModelFailure(Exception):
    """The model endpoint failed in a way no retry fixed; the message is safe to show.

    Carries the tokens the question had already used, so they are still accounted."""

    def __init__(self, message: str, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        super().__init__(message)
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens


@dataclass
class AgentResult:
    text: str
    hops: int = 0
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    partial: bool = False  # the answer was forced by a budget or built from evidence after a failure
    stop_reason: str = "answered"  # answered | hop_limit | deadline | model_failed
    trace: list[str] = field(default_factory=list)  # one line per tool call, for logs and eval
    tool_names: Counter[str] = field(default_factory=Counter)  # calls per tool, for metrics


def describe_call(name: str, arguments: dict[str, Any], default_repo: str | None) -> str:
    """A progress line a user can follow: "searching `retry|backoff` in payments-api"."""
    repo = arguments.get("repo") or default_repo or "all repos"

    def short(value: object) -> str:
        text = str(value)
        return text if len(text) <= ARGUMENT_PREVIEW_CHARS else text[: ARGUMENT_PREVIEW_CHARS - 1] + "…"

    if name == "search":
        return f"searching `{short(arguments.get('pattern', ''))}` in {repo}"
    if name == "read_file":
        start = arguments.get("start_line") or 1
        end = arguments.get("end_line")
        lines = f"L{start}-{end}" if end else f"from L{start}"
        return f"reading `{short(arguments.get('path', ''))}` {lines} in {repo}"
    if name == "list_files":
        return f"listing `{short(arguments.get('path') or '/')}` in {repo}"
    if name == "repo_overview":
        return f"looking over {repo}"
    if name == "list_repos":
        return "listing the repositories"
    if name == "find_definition":
        return f"finding the definition of `{short(arguments.get('symbol', ''))}` in {repo}"
    if name == "find_references":
        return f"finding uses of `{short(arguments.get('symbol', ''))}` in {repo}"
    if name == "log":
        subject = arguments.get("path") or arguments.get("query")
        return f"reading the history of {f'`{short(subject)}` in ' if subject else ''}{repo}"
    if name == "blame":
        return f"finding who last changed `{short(arguments.get('path', ''))}` in {repo}"
    if name == "show":
        return f"reading commit `{short(arguments.get('sha', ''))}` in {repo}"
    if name == "diff":
        return f"comparing `{short(arguments.get('from', ''))}` with `{short(arguments.get('to') or 'HEAD')}` in {repo}"
    return f"calling {short(name)}"


def _failure_message(exc: BaseException) -> str:
    if isinstance(exc, UnusableReply) and exc.__cause__ is not None:
        exc = exc.__cause__  # name what the SDK could not parse, as before
    if isinstance(exc, openai.AuthenticationError):
        return "the model endpoint refused the API key (401): check OPENAI_API_KEY"
    if isinstance(exc, openai.NotFoundError):
        return "the model endpoint does not know this model (404): check CODEBOT_MODEL and OPENAI_BASE_URL"
    if isinstance(exc, openai.RateLimitError):
        return "the model endpoint kept rate-limiting us (429)"
    if isinstance(exc, openai.APITimeoutError):
        return "the model endpoint did not answer in time"
    if isinstance(exc, openai.APIConnectionError):
        return "the model endpoint could not be reached"
    if isinstance(exc, openai.APIStatusError):
        return f"the model endpoint failed (HTTP {exc.status_code})"
    return f"the model endpoint sent a reply we could not use ({type(exc).__name__})"


class Agent:
    def __init__(
        self,
        settings: Settings,
        client: openai.OpenAI,
        registry: ToolRegistry,
        ctx: ToolContext,
        progress: Callable[[str], None] = lambda _text: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.client = client
        self.registry = registry
        self.ctx = ctx
        self.progress = progress
        self.clock = clock

    # --- the loop --------------------------------------------------------------------------
    def run(self, question: AskedQuestion) -> AgentResult:
        deadline = self.clock() + self.settings.question_deadline_seconds
        messages = self._opening_messages(question)
        result = AgentResult(text="")
        default_repo = next(iter(self.ctx.snapshots)) if len(self.ctx.snapshots) == 1 else None
        for hop in range(self.settings.max_hops):
            if deadline - self.clock() < MIN_CALL_SECONDS:
                result.stop_reason = "deadline"
                break
            choice = "required" if hop == 0 and self.settings.tool_choice_required else "auto"
            try:
                message = self._complete(messages, result, deadline, tools=True, tool_choice=choice)
            except Exception as exc:
                return self._after_failure(exc, result)
            result.hops = hop + 1
            calls = message.tool_calls or []
            if not calls:
                if (message.content or "").strip():
                    result.text = message.content or ""
                    return result
                messages.append({"role": "user", "content": "Please answer the question, citing lines."})
                continue
            messages.append(_assistant_message(message))
            for call in calls:
                messages.append(self._run_tool_call(call, hop, result, default_repo))
        else:
            result.stop_reason = "hop_limit"
        return self._forced_answer(messages, result, deadline)

    def _opening_messages(self, question: AskedQuestion) -> list[dict[str, Any]]:
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
        messages.append({"role": "user", "content": self.ctx.redact(question.text)})
        return messages

    def _run_tool_call(
        self, call: Any, hop: int, result: AgentResult, default_repo: str | None
    ) -> dict[str, Any]:
        name = call.function.name
        raw_arguments = call.function.arguments
        outcome = self.registry.call(self.ctx, name, raw_arguments)
        self.progress(describe_call(name, outcome.arguments, default_repo))
        result.tool_calls += 1
        result.tool_names[name if name in self.registry.tools else "unknown"] += 1
        result.trace.append(
            f"{name} {json.dumps(outcome.arguments)[:200]} -> {'ok' if outcome.ok else 'error'}"
        )
        content = outcome.text + self._budget_note(hop)
        return {"role": "tool", "tool_call_id": call.id, "content": content}

    def _budget_note(self, hop: int) -> str:
        left = self.settings.max_hops - hop - 1
        if left > self.settings.budget_warning_hops:
            return ""
        if left == 0:
            return "\n\n[budget: that was your last tool round. Next, write the answer.]"
        return f"\n\n[budget: {left} tool round(s) left. Start concluding.]"

    def _forced_answer(
        self, messages: list[dict[str, Any]], result: AgentResult, deadline: float
    ) -> AgentResult:
        """Tools withdrawn: the model must answer from what it has."""
        result.partial = True
        if deadline - self.clock() >= MIN_CALL_SECONDS:
            messages.append({"role": "user", "content": FINAL_INSTRUCTION})
            try:
                message = self._complete(messages, result, deadline, tools=False, tool_choice=None)
                if (message.content or "").strip():
                    result.text = message.content or ""
                    return result
            except Exception as exc:
                return self._after_failure(exc, result)
        result.text = evidence_summary(self.ctx)
        return result

    def _after_failure(self, exc: Exception, result: AgentResult) -> AgentResult:
        """Best answer from what was found, or ModelFailure when nothing was. Only the model's
        failures: anything else is a bug of ours, raised for the job to log with its traceback."""
        if not isinstance(exc, openai.OpenAIError | UnusableReply):
            raise exc
        result.stop_reason = "model_failed"
        result.partial = True
        if not self.ctx.shown.files():
            raise ModelFailure(_failure_message(exc), result.prompt_tokens, result.completion_tokens) from exc
        result.text = f"I could not finish answering: {_failure_message(exc)}.\n\n" + evidence_summary(
            self.ctx
        )
        return result

    # --- one model call ----------------------------------------------------------------------
    def _complete(
        self,
        messages: list[dict[str, Any]],
        result: AgentResult,
        deadline: float,
        tools: bool,
        tool_choice: str | None,
    ) -> Any:
        kwargs: dict[str, Any] = {
            "model": self.settings.model,
            "messages": trim_to_budget(messages, self.settings.context_budget_chars),
        }
        if tools:
            kwargs["tools"] = self.registry.schemas()
            if tool_choice:
                kwargs["tool_choice"] = tool_choice
        try:
            response = self._create(kwargs, deadline)
        except ValueError as exc:  # the SDK could not parse the body (not JSON, cut off, wrong shape)
            raise UnusableReply(f"the reply could not be parsed ({type(exc).__name__})") from exc
        if not getattr(response, "choices", None) or response.choices[0].message is None:
            raise UnusableReply("the reply had no choices")
        usage = getattr(response, "usage", None)
        if usage is not None:
            result.prompt_tokens += usage.prompt_tokens or 0
            result.completion_tokens += usage.completion_tokens or 0
        return response.choices[0].message

    def _create(self, kwargs: dict[str, Any], deadline: float) -> Any:
        """One chat completion with up to `model_max_retries` retries, all within the deadline.

        We retry rather than the SDK, whose waits (a server's Retry-After up to 2 min) know
        nothing of our deadline: a 429 storm must end in an answer or an apology in time. Each
        attempt gets its share of the time left; a wait that would leave no time is not taken.
        """
        retries = self.settings.model_max_retries
        for attempt in range(retries + 1):
            left = deadline - self.clock()
            per_attempt = max(min(self.settings.model_timeout_seconds, left / (retries - attempt + 1)), 1.0)
            client = self.client.with_options(timeout=per_attempt, max_retries=0)
            try:
                return client.chat.completions.create(
                    **kwargs, extra_headers={"x-stainless-retry-count": str(attempt)}
                )
            except openai.APIError as exc:
                wait = retry_wait_seconds(exc, attempt)
                if wait is None or attempt == retries or self.clock() + wait + MIN_CALL_SECONDS > deadline:
                    raise
                time.sleep(wait)
        raise AssertionError("unreachable")


def retry_wait_seconds(exc: openai.APIError, attempt: int) -> float | None:
    """How long to wait before retrying after `exc`, or None when it is not worth retrying.

    As the SDK would: connection errors, timeouts, 408, 409, 429 and 5xx are retried, after the
    server's Retry-After (or retry-after-ms), else after 0.5 s doubling up to 8 s.
    """
    if isinstance(exc, openai.APIStatusError):
        headers = exc.response.headers
        status = exc.response.status_code
        if headers.get("x-should-retry") == "false" or not (status in (408, 409, 429) or status >= 500):
            return None
        for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
            try:
                return max(0.0, float(headers.get(name, "")) * scale)
            except ValueError:
                continue
    elif not isinstance(exc, openai.APIConnectionError):
        return None  # a reply the SDK could not parse: asking again will not help
    return min(0.5 * 2**attempt, 8.0) * (1 - 0.25 * random.random())


def _assistant_message(message: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": message.content,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments or "{}"},
            }
            for c in message.tool_calls
        ],
    }


def _size(message: dict[str, Any]) -> int:
    return len(message.get("content") or "") + len(json.dumps(message.get("tool_calls") or ""))


def trim_to_budget(messages: list[dict[str, Any]], budget_chars: int) -> list[dict[str, Any]]:
    """Replace the oldest tool outputs with a notice until the whole fits the budget.

    The system prompt, the question and the assistant's tool calls are kept: every tool call
    still has its reply, as the API requires.
    """
    total = sum(_size(m) for m in messages)
    if total <= budget_chars:
        return messages
    trimmed = [dict(m) for m in messages]
    for message in trimmed:
        if total <= budget_chars:
            break
        if message["role"] == "tool" and message["content"] != TRIMMED_NOTICE:
            total -= len(message["content"]) - len(TRIMMED_NOTICE)
            message["content"] = TRIMMED_NOTICE
    return trimmed


def evidence_summary(ctx: ToolContext) -> str:
    """When the model cannot answer: say which code was found, with checkable citations."""
    files = sorted(ctx.shown.files())
    if not files:
        return "I found nothing relevant in the code before I had to stop."
    lines = ["Here is the code I was looking at; it may hold the answer:"]
    for repo, path in files[:10]:
        seen = sorted(ctx.shown.lines[(repo, path)])
        start = seen[0]
        end = start
        while end + 1 in ctx.shown.lines[(repo, path)] and end - start < 40:
            end += 1
        lines.append(f"- [{repo}:{path}#L{start}-L{end}]" if end > start else f"- [{repo}:{path}#L{start}]")
    return "\n".join(lines)
