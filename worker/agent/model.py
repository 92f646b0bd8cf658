"""One model turn against any OpenAI-compatible endpoint: shaped, streamed, bounded, and retried.

`ModelClient.complete()` sends one chat completion request and returns the assembled turn
(text and tool calls). What it takes care of, so the agent loop does not have to (the
request's shape and the capability fallback's choice live in worker/agent/request_shape.py,
the server's fit in worker/agent/model_fit.py, what follows a failed attempt in
worker/agent/model_recovery.py, the reading of a reply in worker/agent/wire.py):

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
- **Waiting.** While an attempt's reply is awaited, a line says what the model is doing
  (`AgentEvents.waiting`: llama.cpp's prompt progress, else the seconds, then the tokens
  written; worker/agent/waiting.py), so a slow local model does not leave the asker blank.
- **Speed.** Every request carries a bounded `max_tokens`; attempts are sized from the speeds
  measured on earlier answers, and no request is sent while an abandoned one may still run on a
  server that does not cancel it and would make it wait: this question's own, or any worker's on
  a server observed serving one request at a time (worker/agent/pacing.py, concurrency.py).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletion

from config.settings import Settings
from worker.agent import concurrency
from worker.agent.context import DEFAULT_CHARS_PER_TOKEN, measured_ratio
from worker.agent.endpoint_memory import TOOLS, EndpointMemory
from worker.agent.events import AgentEvents, NoEvents
from worker.agent.model_errors import ModelFailure, failure
from worker.agent.model_fit import MIN_ATTEMPT_SECONDS, Shaped
from worker.agent.model_recovery import Recoveries, Recovering, retry_wait_seconds
from worker.agent.pacing import TimedStream, Timing, timings_of_body
from worker.agent.waiting import WaitWatch
from worker.agent.wire import (
    LONE_SURROGATE,
    Attempt,
    CutStream,
    DrainedStream,
    EmptyStream,
    ModelTurn,
    ToolCall,
    install_watchdog,
    make_openai_client,
    read_stream,
    turn_from_json,
)

__all__ = ["ModelClient", "ModelTurn", "ToolCall", "make_openai_client", "retry_wait_seconds"]

log = logging.getLogger("codebot.model")

CONNECT_TIMEOUT_SECONDS = 5.0


# --- the client --------------------------------------------------------------------------------------


class ModelClient(Recovering):
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
        sent depends on what the endpoint accepts. Raises ModelFailure. The attempts' loop: what
        follows a failed one is decided in worker/agent/model_recovery.py."""
        tried = Recoveries(retries=self.settings.model_max_retries)
        self._discover_once()
        if tools:
            self._fail_if_tools_unseen()
        while True:
            self._wait_while_busy(deadline)
            left = deadline - self.clock()
            if left < MIN_ATTEMPT_SECONDS:
                raise self._with_tokens(self._out_of_time("the question's deadline passed", deadline))
            shaped = self._shape(messages, question_at, tools, tool_choice, tried.suspected)
            seconds = self._size(shaped, left, tried.retries - tried.attempt)
            self.events.thinking()
            try:
                turn = self._send(shaped, seconds, tried.attempt)
            except CutStream as cut:
                self._account(cut.turn, shaped.sent_chars)
                retry = self._after_cut(tried, deadline)
                if retry is not None:
                    tried.take(retry)
                    continue
                turn = cut.turn  # no time to ask again: the part that came is the answer
                turn.cut_off = True
            except EmptyStream:
                tried.take(self._after_empty_stream(tried))
                continue
            except (openai.OpenAIError, httpx2.HTTPError, ValueError) as exc:
                # The model's failures only (an SDK error, a body we could not parse): anything
                # else is a bug of ours and propagates, for the job to log as a crash.
                tried.take(self._after_error(exc, shaped, tried, deadline))
                continue
            return self._answered(turn, shaped, tried.suspected)

    def _fail_if_tools_unseen(self) -> None:
        if self.memory.ignores(TOOLS):
            # the model would never see them: no code can be read, and no time is spent finding out
            found = self._located(failure("tools_unseen", self.memory.facts.ignored[TOOLS]))
            found.evidence = self.memory.facts.tools_unseen_from
            raise self._with_tokens(found)

    def _answered(self, turn: ModelTurn, shaped: Shaped, suspected: set[str]) -> ModelTurn:
        """What an answer teaches: a feature left out on suspicion was refused, those it used work."""
        for feature in suspected:
            self.memory.refuse(feature, "an error naming no field, gone once this was left out")
        self.memory.confirm(self._learn_from_answer(turn, shaped) - suspected)
        return turn

    def _with_tokens(self, exc: ModelFailure) -> ModelFailure:
        exc.prompt_tokens, exc.completion_tokens = self.prompt_tokens, self.completion_tokens
        return exc

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
        # The body as JSON bytes, given to the real client's `post` as `content`: the same
        # request `chat.completions.create` sends, without its transformation of every message
        # against the SDK's TypedDicts (typing introspection of the whole history, ~5 ms a call,
        # the largest cost of a question beyond its tools). Auth, headers, timeouts, the
        # response hook and the SDK's error mapping are the client's own, as with `create`.
        content = utf8_json(shaped.kwargs)
        options: openai.RequestOptions = {
            "timeout": timeout,
            "headers": headers,
            "security": {"bearer_auth": True},
        }
        flight = concurrency.sent(self.memory.id, timing)
        with Attempt(seconds) as attempt:
            try:
                with WaitWatch(self.events.waiting) as watch:
                    turn = self._post(bool(shaped.kwargs.get("stream")), content, options, timing, watch)
            except EmptyStream:
                self._begun(None, completed=False)
                concurrency.failed(flight)
                # llama-cpp-python resets the connection after a stream that failed inside: a
                # pooled copy of it would fail the next request
                attempt.drop_connection()
                raise
            except BaseException as exc:  # a stopped question's too: the request is no longer open
                concurrency.failed(flight)
                if isinstance(exc, Exception):
                    exc._codebot_seconds = seconds  # type: ignore[attr-defined]
                    if attempt.fired and attempt.replied:
                        exc._codebot_cut = True  # type: ignore[attr-defined]
                if attempt.replied and not isinstance(exc, openai.APIStatusError):
                    # a reply began, and never came whole (cut, or its time ran out)
                    self._begun(exc.turn if isinstance(exc, CutStream) else None, completed=False)
                raise
        timing.finished = time.monotonic()
        self._last_timing = timing
        self._begun(turn, completed=True)
        self.memory.remember_concurrency(concurrency.answered(self.memory.id, flight))
        self._account(turn, shaped.sent_chars)
        return turn

    def _begun(self, turn: ModelTurn | None, completed: bool) -> None:
        """A reply the server began: counted (until one came whole), and the model it names."""
        self.memory.count_reply(completed)
        if turn is not None and turn.model:
            self.memory.remember_served_model(turn.model)

    def _post(
        self, streamed: bool, content: bytes, options: openai.RequestOptions, timing: Timing, watch: WaitWatch
    ) -> ModelTurn:
        """The request sent and its reply read, streamed or in one body."""
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
            return read_stream(TimedStream(stream, timing, watch), watch.guarded(self.events.text))
        raw = self.client.post("/chat/completions", cast_to=httpx2.Response, content=content, options=options)
        body = raw.read()
        timing.timings = timings_of_body(body)
        turn = turn_from_json(body)
        if turn.content:
            watch.guarded(self.events.text)(turn.content)  # the whole text, as one delta
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


def utf8_json(body: dict[str, Any]) -> bytes:
    """`body` as UTF-8 JSON; a lone surrogate (worker/agent/wire.py's utf8_text) as U+FFFD."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode()
    except UnicodeEncodeError:
        return LONE_SURROGATE.sub("\ufffd", text).encode()
