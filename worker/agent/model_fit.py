"""The part of a model call fitted to the server: what it is, how fast, and what to tell the asker.

`ServerFit` is mixed into `ModelClient` (worker/agent/model.py): discovery of the server's kind
and window (worker/agent/server_kind.py, discovery.py), the reply's bound (`max_tokens`), each
attempt sized from the measured speeds and never sent while an abandoned one may still run
(worker/agent/pacing.py), what ordinary answers teach, and apologies that name the endpoint's
host, the setting to raise and the speed measured.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import openai

from config.settings import Settings
from worker.agent.concurrency import ONE_AT_A_TIME
from worker.agent.context import Window
from worker.agent.discovery import UNREACHABLE, discover
from worker.agent.endpoint_memory import (
    MAX_COMPLETION_TOKENS,
    MAX_TOKENS,
    OPENAI_BASE_URL,
    TOOL_CHOICE_REQUIRED,
    TOOLS,
    TOOLS_UNSEEN_FROM_PROPS,
    TOOLS_UNSEEN_FROM_USAGE,
    EndpointMemory,
    base_url_of,
    display_host,
    speed_text,
)
from worker.agent.model_errors import ModelFailure, failure
from worker.agent.pacing import (
    ATTEMPT_MARGIN,
    MIN_REPLY_TOKENS,
    SECONDS_FOR_CONNECTING,
    UNKNOWN_CAP_TOKENS,
    Speeds,
    Timing,
    measured,
)
from worker.agent.server_kind import LOCAL_KINDS, UNKNOWN, kind_of
from worker.agent.time_advice import Situation, advise
from worker.agent.wire import ModelTurn, fields

log = logging.getLogger("codebot.model")

MIN_ATTEMPT_SECONDS = 1.0


@dataclass
class Shaped:
    kwargs: dict[str, Any]
    features: set[str]  # the optional features this request uses
    sent_chars: int
    reply_cap: int = 0  # the reply's bound before it is fitted to the time left
    tool_chars: int = 0  # characters of tool schemas sent


def calls_a_listed_tool(turn: ModelTurn, tools: list[dict[str, Any]] | None) -> bool:
    """A call naming a tool the request listed, with arguments that are a JSON object: proof
    the model was shown the tools."""
    listed = {fields(fields(tool).get("function")).get("name") for tool in tools or []}
    for call in turn.tool_calls:
        try:
            arguments = json.loads(call.arguments or "{}")
        except (ValueError, RecursionError):  # the model's text: nested too deeply is no proof either
            continue
        if call.name in listed and isinstance(arguments, dict):
            return True
    return False


def on_this_network(host: str) -> bool:
    """A loopback, private or .local host: a server of the team's own, likely one slot wide."""
    name = host.rsplit(":", 1)[0].strip("[]") if host.count(":") <= 1 else host.strip("[]")
    if name in ("localhost", "") or name.endswith((".local", ".internal", ".lan")):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return "." not in name  # a bare machine name on the LAN
    return address.is_loopback or address.is_private or address.is_link_local


class ServerFit:
    settings: Settings
    memory: EndpointMemory
    clock: Callable[[], float]
    chars_per_token: float
    log_extra: dict[str, Any]
    _last_timing: Timing | None
    _attempt_timing: Timing | None
    _previous_prompt_tokens: int = 0  # the last answered turn's, within this question
    _own_busy_until: float = 0.0  # wall clock: until when this question's abandoned request may run
    _advised_on: tuple[int, int] = (0, 0)  # the last request's prompt tokens and reply bound, for advice

    def _with_tokens(self, exc: ModelFailure) -> ModelFailure:
        raise NotImplementedError  # ModelClient's

    def _discover_once(self) -> None:
        """Ask the server (GETs only) for its window and kind, once per endpoint per memory period."""
        if self.memory.facts.server_kind and (
            self.settings.model_context_tokens or self.memory.context() is not None
        ):
            return
        found = discover(self.settings)
        if found.context is not None and found.context[1] == UNREACHABLE:
            return  # a server that was down is asked again
        if self.memory.context() is None:
            self.memory.remember_context(*(found.context or (0, "none")))
        self.memory.remember_kind(found.kind)
        self.memory.remember_served_model(found.served_model)
        for feature, why in kind_of(found.kind).known_refusals.items():
            self.memory.refuse(feature, why)
        if found.tools_shown is False and not self.memory.confirmed(TOOLS):
            # evidence first: a listed tool the model called here outweighs the template's caps
            self.memory.ignore_tools(
                TOOLS_UNSEEN_FROM_PROPS,
                "llama.cpp's /props: the chat template has no tool support (chat_template_caps."
                "supports_tools=false), so the model never sees the tools; start the server with a "
                "tool-capable template (--chat-template-file)",
            )

    @property
    def host(self) -> str:
        return display_host(base_url_of(self.settings))

    def speeds(self) -> Speeds:
        return Speeds(self.memory.facts.prompt_tps, self.memory.facts.generation_tps)

    def _size(self, shaped: Shaped, left: float, tries_left: int) -> float:
        """This attempt's seconds, and its `max_tokens` fitted to them, from the measured speeds."""
        share = min(self.settings.model_timeout_seconds, left / (tries_left + 1))
        speeds = self.speeds()
        if not speeds.known and self.memory.facts.server_kind in LOCAL_KINDS:
            # A local server not yet measured may read a first prompt for minutes (a CPU box):
            # a cut attempt wastes what it read, so the first one may use all the time left.
            share = left
        cap = shaped.reply_cap
        self._advised_on = (int(shaped.sent_chars / self.chars_per_token), cap)
        if speeds.known and cap and on_this_network(self.host):
            # hosted reasoning models think before the first delta: their speeds read low, so only
            # a server of our own has its reply bounded by them
            # local servers keep the last prompt's tokens (llama.cpp's cache_prompt, llama-cpp-python's
            # prefix match): a later turn reads only what was added since
            prompt_tokens = max(
                int(shaped.sent_chars / self.chars_per_token) - self._previous_prompt_tokens, 64
            )
            fits = speeds.reply_tokens_within((left - SECONDS_FOR_CONNECTING) / ATTEMPT_MARGIN, prompt_tokens)
            if fits < MIN_REPLY_TOKENS:
                raise self._with_tokens(
                    self._out_of_time(
                        f"{prompt_tokens} prompt tokens and a reply need more than the {left:.0f} s left",
                        left + self.clock(),
                    )
                )
            cap = min(cap, fits)
            share = max(
                share, ATTEMPT_MARGIN * speeds.seconds_for(prompt_tokens, cap) + SECONDS_FOR_CONNECTING
            )
        if cap:
            shaped.kwargs[
                "max_completion_tokens" if MAX_COMPLETION_TOKENS in shaped.features else "max_tokens"
            ] = cap
        return min(max(share, 1.0), left)

    def _wait_while_busy(self, deadline: float) -> None:
        """No request while an abandoned one may still run on a server that does not cancel it
        and would make this one wait: this question's own, or any worker's where the server was
        observed to serve one request at a time (worker/agent/concurrency.py). Where that is not
        known, another worker's abandoned request is no reason to wait: a guess stalls no one."""
        served_at_once = self.memory.facts.concurrency
        if served_at_once >= 2:
            return  # observed serving several at once: the abandoned request holds up no other
        serial = served_at_once == ONE_AT_A_TIME
        busy_for = (self.memory.facts.busy_until if serial else self._own_busy_until) - time.time()
        if busy_for <= 0:
            return
        whose = (
            "the server serves one request at a time (observed) and is still busy with an abandoned reply"
            if serial
            else "the server may still be generating this question's abandoned reply"
        )
        if self.clock() + busy_for + MIN_ATTEMPT_SECONDS >= deadline:
            raise self._with_tokens(self._out_of_time(f"{whose} for {busy_for:.0f} s more", deadline))
        log.info("%s: waiting %.1f s before asking it again", whose, busy_for, extra=self.log_extra)
        time.sleep(busy_for)

    def _note_abandoned(self, exc: Exception, shaped: Shaped) -> None:
        """A timed-out attempt on a server that keeps generating: remember until when it may.
        A cut stream still teaches the speeds: the prompt's up to its first delta, and the
        generation's from the deltas that came after (about a token each)."""
        timing = self._attempt_timing
        if timing is not None and timing.first_delta is not None and timing.first_delta > timing.started:
            read = int(shaped.sent_chars / self.chars_per_token) - self._previous_prompt_tokens
            writing = time.monotonic() - timing.first_delta
            self.memory.remember_speed(
                read / (timing.first_delta - timing.started) if read >= 64 else None,
                timing.deltas / writing if timing.deltas >= 8 and writing > 0.5 else None,
            )
        if not isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
            return
        if not getattr(exc, "_codebot_cut", False) and not isinstance(exc, openai.APITimeoutError):
            return  # refused connections leave nothing running
        kind = self.memory.facts.server_kind or UNKNOWN
        if kind_of(kind).cancels_on_disconnect or (kind == UNKNOWN and not on_this_network(self.host)):
            return  # a hosted API (a gateway, a cloud) does not make our next request wait its turn
        speeds = self.speeds()
        reply = int(shaped.kwargs.get("max_tokens") or shaped.kwargs.get("max_completion_tokens") or 0)
        if speeds.known and reply:
            still = speeds.seconds_for(int(shaped.sent_chars / self.chars_per_token), reply)
        else:  # not measured yet: assume it needs as long again as it was given
            still = float(getattr(exc, "_codebot_seconds", 0.0) or self.settings.model_timeout_seconds)
        self._own_busy_until = max(self._own_busy_until, time.time() + still)
        self.memory.remember_busy_until(time.time() + still)

    def _learn_from_answer(self, turn: ModelTurn, shaped: Shaped) -> set[str]:
        """The features this answer shows the endpoint honours (an ignored one is remembered)."""
        features = set(shaped.features)
        self._previous_prompt_tokens = turn.prompt_tokens
        timing = self._last_timing
        if timing is not None:
            self.memory.remember_speed(*measured(timing, turn.prompt_tokens, turn.completion_tokens))
        if calls_a_listed_tool(turn, shaped.kwargs.get("tools")):
            features.add(TOOLS)  # the model saw the tools, whatever the server's `usage` says
        elif (
            shaped.tool_chars
            and turn.prompt_tokens
            and turn.prompt_tokens * 8 < shaped.tool_chars
            and not self.memory.confirmed(TOOLS)
        ):
            # a count that small is the template dropping the tools, or a proxy counting only the
            # messages: only the model's never calling a tool here makes it the first
            self.memory.ignore_tools(
                TOOLS_UNSEEN_FROM_USAGE,
                f"the server counted {turn.prompt_tokens} prompt tokens for a request whose tool schemas "
                f"alone are {shaped.tool_chars:,} characters: its chat template drops the tools",
            )
        if TOOL_CHOICE_REQUIRED in features and not turn.tool_calls:
            features.discard(TOOL_CHOICE_REQUIRED)
            self.memory.ignore(TOOL_CHOICE_REQUIRED, 'a reply to tool_choice="required" without a tool call')
        return features

    def _located(self, found: ModelFailure) -> ModelFailure:
        """The apology names the endpoint's host (never its credentials or path)."""
        text = str(found)
        for phrase in ("the model endpoint", "on this server"):
            if phrase in text and self.host not in text:
                found.args = (text.replace(phrase, phrase.replace("this", "the") + f" at {self.host}", 1),)
                break
        return found

    def _with_time_hint(
        self, found: ModelFailure, attempt_seconds: float, prompt_tokens: int = 0
    ) -> ModelFailure:
        """What would fit the measured speeds (worker/agent/time_advice.py), else which setting
        to raise and how fast the server was measured."""
        settings = self.settings
        advice = self.time_advice()
        if advice and not (attempt_seconds and abs(attempt_seconds - settings.model_timeout_seconds) < 0.5):
            found.args = (f"{found}; {advice}",)
            return found
        if attempt_seconds and abs(attempt_seconds - settings.model_timeout_seconds) < 0.5:
            setting = f"CODEBOT_MODEL_TIMEOUT_SECONDS (now {settings.model_timeout_seconds:.0f} s)"
        else:
            setting = f"CODEBOT_QUESTION_DEADLINE_SECONDS (now {settings.question_deadline_seconds:.0f} s)"
        speed = speed_text(self.memory.facts.prompt_tps, self.memory.facts.generation_tps)
        timing = self._attempt_timing
        if not speed and attempt_seconds and prompt_tokens and (timing is None or timing.first_delta is None):
            # nothing came back at all: the prompt alone took longer than the attempt
            speed = f"it read ~{prompt_tokens:,} prompt tokens at under {prompt_tokens / attempt_seconds:,.0f} tokens/s"
        found.args = (f"{found}; raise {setting}" + (f" ({speed})" if speed else ""),)
        return found

    def time_advice(self) -> str:
        """Setting values that would fit the speeds measured here, for an apology; "" unmeasured."""
        prompt_tokens, reply_cap = self._advised_on
        window = self.settings.model_context_tokens or (self.memory.context() or (0, ""))[0]
        situation = Situation(
            self.speeds(), prompt_tokens, reply_cap, self.settings.question_deadline_seconds, window
        )
        return advise(situation)

    def _out_of_time(self, detail: str, deadline: float) -> ModelFailure:
        found = self._located(failure("timeout", detail))
        return self._with_time_hint(found, 0.0)

    def _reply_cap(self, window: Window) -> int:
        """CODEBOT_MODEL_MAX_TOKENS, else the window's answer reserve (a fitted request never
        overflows), else a hosted model's bound; 0 once the endpoint refused both names."""
        if self.memory.refuses(MAX_TOKENS) and self.memory.refuses(MAX_COMPLETION_TOKENS):
            return 0
        if self.settings.model_max_tokens:
            return self.settings.model_max_tokens
        return window.reserve_tokens if window.tokens else UNKNOWN_CAP_TOKENS

    def _max_tokens_field(self) -> str:
        # OpenAI's reasoning models refuse `max_tokens`; local servers may not know the newer name
        openai = base_url_of(self.settings) == OPENAI_BASE_URL
        preferred, other = (
            (MAX_COMPLETION_TOKENS, MAX_TOKENS) if openai else (MAX_TOKENS, MAX_COMPLETION_TOKENS)
        )
        return other if self.memory.refuses(preferred) else preferred
