"""One model turn against any OpenAI-compatible endpoint: shaped, streamed, bounded, and retried.

`ModelClient.complete()` sends one chat completion request and returns the assembled turn
(text and tool calls). What it takes care of, so the agent loop does not have to (the
request's shape and the capability fallback's choice live in worker/agent/request_shape.py,
the server's fit in worker/agent/model_fit.py):

- **Request shape.** Assistant tool-call turns are sent with `content: ""` (strict servers
  reject `null`), or without content, or with null, whichever the endpoint accepts. The
  forced final answer lists the tools with `tool_choice="none"`, or, where that is refused,
  folds the tool history into text (worker/agent/context.py).
- **Capability fallback.** A 400/422/500 whose text names an optional field we sent
  (`tool_choice`, `parallel_tool_calls`, `stream_options`, `stream`, `content`) is retried
  once without it; an error that names nothing, on a feature never seen to work, makes the
  usual suspects (`tool_choice="required"`, `parallel_tool_calls`, `tool_choice="none"`)
  dropped one at a time. What was refused is remembered per endpoint (endpoint_memory.py).
- **Streaming.** Turns are requested with `stream=True` and `stream_options.include_usage`:
  text deltas go to `AgentEvents.text` as they arrive, tool-call fragments are assembled by
  index, the usage chunk (empty `choices`) is read. A stream that ends empty (llama-cpp-python
  with tools) makes the endpoint non-streaming; a server that ignores `stream` and answers in
  one JSON body is read as such. A stream that ends without a finish reason was cut off
  (`[DONE]` or not): asked again within the deadline, else its turn comes back `cut_off`.
- **Time.** Each attempt has a total wall-clock bound (its share of the question's time left,
  at most `model_timeout_seconds`): at the end, the connection it reads from is shut, so a
  reply trickling in a byte at a time is cut, not waited for read by read (wire.py).
- **Context.** The request is fitted to the endpoint's window (discovered, configured, or
  learned from its "maximum context length" error, which is retried once trimmed).
- **Retries** of 408/409/429/5xx and connection errors, with Retry-After, within the deadline.
- **Harmless learning.** What a server accepts is learned from ordinary answers and from the
  error bodies of refused requests; nothing is sent only to test it. Which kind of server it is
  (worker/agent/server_kind.py) is told from GETs: a kind known to crash on a field never gets
  it, and llama.cpp's template verdict says whether the model would see the tools at all.
- **Speed.** Every request carries a bounded `max_tokens`; attempts are sized from the speeds
  measured on earlier answers, and no request is sent while an abandoned one may still run on a
  server that does not cancel it (worker/agent/pacing.py).
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletion

from config.settings import Settings
from worker.agent import model_errors
from worker.agent.context import DEFAULT_CHARS_PER_TOKEN, measured_ratio
from worker.agent.endpoint_memory import STREAM, TOOL_CHOICE_AUTO, TOOLS, EndpointMemory
from worker.agent.events import AgentEvents, NoEvents
from worker.agent.model_errors import ModelFailure, classify, context_overflow_of, failure
from worker.agent.model_fit import MIN_ATTEMPT_SECONDS, Shaped
from worker.agent.pacing import TimedStream, Timing, timings_of_body
from worker.agent.request_shape import RequestShaping
from worker.agent.wire import (
    Attempt,
    CutStream,
    DrainedStream,
    EmptyStream,
    ModelTurn,
    ToolCall,
    add_fragment,
    calls_from,
    fields,
    install_watchdog,
    make_openai_client,
    turn_from_json,
)

__all__ = ["ModelClient", "ModelTurn", "ToolCall", "make_openai_client", "retry_wait_seconds"]

log = logging.getLogger("codebot.model")

CONNECT_TIMEOUT_SECONDS = 5.0
MAX_FALLBACKS_PER_CALL = 6  # refused fields dropped within one call (there are fewer features)


# --- the client --------------------------------------------------------------------------------------


class ModelClient(RequestShaping):
    def __init__(
        self,
        settings: Settings,
        client: openai.OpenAI,
        memory: EndpointMemory,
        events: AgentEvents | None = None,
        clock: Callable[[], float] = time.monotonic,
        log_extra: dict[str, Any] | None = None,
    ) -> None:
        install_watchdog(client)
        self.settings = settings
        self.client = client.with_options(max_retries=0)
        self.memory = memory
        self.events: AgentEvents = events or NoEvents()
        self.clock = clock
        self.log_extra = log_extra or {}
        self.chars_per_token = DEFAULT_CHARS_PER_TOKEN
        self.measured = False
        self.prompt_tokens = 0  # across this question's calls, for accounting
        self.completion_tokens = 0
        self._last_timing: Timing | None = None  # the last answered attempt's, for the speeds
        self._attempt_timing: Timing | None = None  # the last attempt's, answered or not

    # --- one call ------------------------------------------------------------------------------------
    def complete(
        self,
        messages: list[dict[str, Any]],
        question_at: int,
        *,
        tools: list[dict[str, Any]] | None,
        tool_choice: str | None,
        deadline: float,
    ) -> ModelTurn:
        """One model turn. `tool_choice` is what we want ("required", "auto", "none"); what is
        sent depends on what the endpoint accepts. Raises ModelFailure."""
        retries = self.settings.model_max_retries
        attempt = 0
        suspected: set[str] = set()  # dropped on suspicion in this call; refused if that works
        fallbacks = 0
        context_retried = empty_retried = hung_up = False
        self._discover_once()
        if tools and self.memory.ignores(TOOLS):
            # the model would never see them: no code can be read, and no time is spent finding out
            found = self._located(failure("no_tool_calls", self.memory.facts.ignored[TOOLS]))
            found.args = (f"{found}; its chat template never shows the model the tools",)
            raise self._with_tokens(found)
        while True:
            self._wait_while_busy(deadline)
            left = deadline - self.clock()
            if left < MIN_ATTEMPT_SECONDS:
                raise self._with_tokens(self._out_of_time("the question's deadline passed", deadline))
            shaped = self._shape(messages, question_at, tools, tool_choice, suspected)
            seconds = self._size(shaped, left, retries - attempt)
            self.events.thinking()
            try:
                turn = self._send(shaped, seconds, attempt)
            except CutStream as cut:
                self._account(cut.turn, shaped.sent_chars)
                wait = min(0.5 * 2**attempt, 8.0)
                if attempt < retries and self.clock() + wait + MIN_ATTEMPT_SECONDS < deadline:
                    log.info(
                        "model reply cut off mid-stream; asking again in %.1f s", wait, extra=self.log_extra
                    )
                    time.sleep(wait)
                    attempt += 1
                    continue
                log.warning("model reply cut off mid-stream, no time to ask again", extra=self.log_extra)
                turn = cut.turn
                turn.cut_off = True
            except EmptyStream:
                if self.memory.confirmed(STREAM) and not empty_retried:
                    empty_retried = True  # it streamed before: once may be a glitch
                    continue
                self.memory.refuse(STREAM, "a streamed reply ended empty")
                continue
            except (openai.OpenAIError, httpx2.HTTPError, ValueError) as exc:
                # The model's failures only (an SDK error, a body we could not parse): anything
                # else is a bug of ours and propagates, for the job to log as a crash.
                if not hung_up and _hung_up(exc):
                    hung_up = True  # most likely a pooled connection the server had dropped
                    continue
                overflow = context_overflow_of(exc)
                if overflow is not None and not context_retried:
                    context_retried = True
                    self._learn_overflow(overflow, shaped.sent_chars, exc)
                    continue
                dropped = (
                    self._fallback(exc, shaped.features, suspected)
                    if fallbacks < MAX_FALLBACKS_PER_CALL
                    else None
                )
                if dropped:
                    fallbacks += 1
                    continue
                self._note_abandoned(exc, shaped)
                wait = retry_wait_seconds(exc, attempt)
                if (
                    wait is not None
                    and attempt < retries
                    and self.clock() + wait + MIN_ATTEMPT_SECONDS < deadline
                ):
                    log.info(
                        "model call failed (%s); retrying in %.1f s",
                        type(exc).__name__,
                        wait,
                        extra=self.log_extra,
                    )
                    time.sleep(wait)
                    attempt += 1
                    continue
                raise self._with_tokens(self._failure(exc, shaped)) from exc
            for feature in suspected:
                self.memory.refuse(feature, "an error naming no field, gone once this was left out")
            self.memory.confirm(self._learn_from_answer(turn, shaped) - suspected)
            return turn

    def _failure(self, exc: Exception, shaped: Shaped) -> ModelFailure:
        found = classify(exc)
        if isinstance(exc, ModelFailure):
            return found
        if found.kind in ("timeout", "unreachable") and getattr(exc, "_codebot_cut", False):
            found = failure("cut", found.detail, seconds=getattr(exc, "_codebot_seconds", 0.0))
        if found.kind == "refused" and TOOL_CHOICE_AUTO in self.memory.facts.refused:
            found = failure("no_tool_calls", found.detail, found.status)
        found = self._located(found)
        if found.kind in ("timeout", "cut"):
            found = self._with_time_hint(
                found, getattr(exc, "_codebot_seconds", 0.0), int(shaped.sent_chars / self.chars_per_token)
            )
        log.warning(
            "model endpoint failure kind=%s status=%s: %s",
            found.kind,
            found.status,
            found.detail or "(no error text)",
            extra=self.log_extra,
        )
        return found

    def _with_tokens(self, exc: ModelFailure) -> ModelFailure:
        exc.prompt_tokens, exc.completion_tokens = self.prompt_tokens, self.completion_tokens
        return exc

    def _learn_overflow(
        self, overflow: model_errors.ContextOverflow, sent_chars: int, exc: Exception
    ) -> None:
        if overflow.prompt_tokens:
            ratio = measured_ratio(sent_chars, overflow.prompt_tokens)
            if ratio:
                self.chars_per_token, self.measured = ratio, True
        window = overflow.window_tokens
        if window is None:  # the server did not say: assume what we sent was a quarter too much
            current = self.window()
            estimated = current.tokens or int(sent_chars / self.chars_per_token)
            window = max(int(estimated * 0.75), 512)
        if not self.settings.model_context_tokens:
            self.memory.remember_context(window, "the server's context-length error")
        log.warning(
            "model context window exceeded (window %s tokens): trimming and retrying once: %s",
            window,
            model_errors.clean_detail(
                model_errors.error_text(exc) if isinstance(exc, openai.APIStatusError) else str(exc)
            ),
            extra=self.log_extra,
        )

    # --- sending and reading -------------------------------------------------------------------------------
    def _send(self, shaped: Shaped, seconds: float, attempt_number: int) -> ModelTurn:
        timeout = httpx2.Timeout(seconds, connect=min(CONNECT_TIMEOUT_SECONDS, seconds))
        headers = {"x-stainless-retry-count": str(attempt_number)}  # as the SDK marks its own retries
        timing = Timing(started=time.monotonic())
        self._last_timing = None
        self._attempt_timing = timing
        log.info(
            "model request sent: attempt %d, up to %.0f s, max tokens %s, ~%d characters",
            attempt_number + 1,
            seconds,
            shaped.kwargs.get("max_tokens") or shaped.kwargs.get("max_completion_tokens") or "none",
            shaped.sent_chars,
            extra=self.log_extra,
        )
        streamed = bool(shaped.kwargs.get("stream"))
        # The body as JSON bytes, given to the real client's `post` as `content`: the same
        # request `chat.completions.create` sends, without its transformation of every message
        # against the SDK's TypedDicts (typing introspection of the whole history, ~5 ms a call,
        # the largest cost of a question beyond its tools). Auth, headers, timeouts, the
        # response hook and the SDK's error mapping are the client's own, as with `create`.
        content = json.dumps(shaped.kwargs, ensure_ascii=False, separators=(",", ":")).encode()
        options: openai.RequestOptions = {
            "timeout": timeout,
            "headers": headers,
            "security": {"bearer_auth": True},
        }
        with Attempt(seconds) as attempt:
            try:
                if streamed:
                    stream = self.client.post(
                        "/chat/completions",
                        cast_to=ChatCompletion,
                        content=content,
                        options=options,
                        stream=True,
                        # chunks as the JSON the server sent: the SDK's pydantic construction of
                        # every chunk was a twentieth of the worker's busy time at c=64 (py-spy);
                        # read to the end, so the connection is reused (wire.py)
                        stream_cls=DrainedStream,
                    )
                    turn = self._read_stream(TimedStream(stream, timing))
                else:
                    raw = self.client.post(
                        "/chat/completions", cast_to=httpx2.Response, content=content, options=options
                    )
                    body = raw.read()
                    timing.timings = timings_of_body(body)
                    turn = turn_from_json(body)
                    if turn.content:
                        self.events.text(turn.content)  # the whole text, as one delta
            except EmptyStream:
                # llama-cpp-python resets the connection after a stream that failed inside: a
                # pooled copy of it would fail the next request
                attempt.drop_connection()
                raise
            except Exception as exc:
                exc._codebot_seconds = seconds  # type: ignore[attr-defined]
                if attempt.fired and attempt.replied:
                    exc._codebot_cut = True  # type: ignore[attr-defined]
                raise
        timing.finished = time.monotonic()
        self._last_timing = timing
        self._account(turn, shaped.sent_chars)
        return turn

    def _account(self, turn: ModelTurn, sent_chars: int) -> None:
        if turn.prompt_tokens:
            ratio = measured_ratio(sent_chars, turn.prompt_tokens)
            if ratio:
                self.chars_per_token, self.measured = ratio, True
        else:  # no usage reported (some servers, an interrupted stream): count an estimate
            turn.prompt_tokens = int(sent_chars / self.chars_per_token)
            produced = len(turn.content) + sum(len(c.name) + len(c.arguments) for c in turn.tool_calls)
            turn.completion_tokens = turn.completion_tokens or int(produced / self.chars_per_token)
        self.prompt_tokens += turn.prompt_tokens
        self.completion_tokens += turn.completion_tokens

    def _read_stream(self, stream: Any) -> ModelTurn:
        response: httpx2.Response = stream.response
        if "text/event-stream" not in response.headers.get("content-type", ""):
            # the server ignored stream=True and answered in one piece (or sent garbage)
            turn = turn_from_json(response.read())
            if turn.content:
                self.events.text(turn.content)
            return turn
        text: list[str] = []
        slots: dict[int, dict[str, str]] = {}
        finish: str | None = None
        usage: dict[str, Any] = {}
        for chunk in stream:  # JSON as sent (Stream[object]): no model object built per chunk
            data = fields(chunk)
            usage = fields(data.get("usage")) or usage
            choices = data.get("choices")
            for choice in choices if isinstance(choices, list) else []:  # the usage chunk has none
                choice = fields(choice)
                if (choice.get("index", 0) or 0) != 0:
                    continue
                delta = fields(choice.get("delta"))
                content = delta.get("content")
                if isinstance(content, str) and content:
                    text.append(content)
                    self.events.text(content)
                calls = delta.get("tool_calls")
                for fragment in calls if isinstance(calls, list) else []:
                    add_fragment(slots, fragment)
                reason = choice.get("finish_reason")
                finish = reason if isinstance(reason, str) and reason else finish
        if not text and not slots and finish is None:
            raise EmptyStream()
        turn = ModelTurn(content="".join(text), tool_calls=calls_from(slots), finish_reason=finish)
        if usage:
            turn.prompt_tokens = int(usage.get("prompt_tokens") or 0)
            turn.completion_tokens = int(usage.get("completion_tokens") or 0)
        if finish is None:
            # Every server ends a whole reply with a finish reason; a stream that ends without
            # one (`[DONE]` or not) was cut: a gateway or connection closing half-way.
            raise CutStream(turn)
        return turn


def _hung_up(exc: Exception) -> bool:
    """The server closed the connection without a byte of response: sent once more, on a fresh
    connection, even with model_max_retries 0. A keep-alive connection a server (or a proxy)
    dropped while it sat in the pool fails just so, and the request then never reached it."""
    cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) else exc
    return isinstance(cause, httpx2.RemoteProtocolError) and "without sending a response" in str(cause)


def retry_wait_seconds(exc: Exception, attempt: int) -> float | None:
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
        return None  # a reply we could not parse: asking again will not help
    return min(0.5 * 2**attempt, 8.0) * (1 - 0.25 * random.random())
