"""What one model request sends: the window it is fitted to, the fields and content style the
endpoint accepts, and which optional field to leave out after a refusal.

`RequestShaping` is mixed into `ModelClient` (worker/agent/model.py), on top of `ServerFit`
(worker/agent/model_fit.py: the server's kind, speeds and the reply's bound). `_shape` turns the
agent's messages and tools into the request's fields (`Shaped`): the tools and history fitted
to the context window (worker/agent/context.py), `tool_choice` and `parallel_tool_calls` as
the endpoint takes them, streaming with usage, and assistant tool-call turns with `content`
"" (strict servers reject null), absent, or null. `_fallback` names the feature to drop after
a refusal: the one its error names, else, for an error naming none, the usual suspects one at
a time; what was refused is remembered per endpoint (worker/agent/endpoint_memory.py).
"""

from __future__ import annotations

import logging
from typing import Any

from worker.agent.context import ContextTooSmall, Window, fit, fit_tools, fold_tool_history, request_chars
from worker.agent.endpoint_memory import (
    ABSENT_CONTENT,
    EMPTY_CONTENT,
    PARALLEL_TOOL_CALLS,
    STREAM,
    STREAM_OPTIONS,
    TOOL_CHOICE_AUTO,
    TOOL_CHOICE_NONE,
    TOOL_CHOICE_REQUIRED,
)
from worker.agent.model_errors import failure, refusal_of
from worker.agent.model_fit import ServerFit, Shaped
from worker.agent.server_kind import LLAMA_CPP
from worker.tools import CONTRACT_TOOLS

log = logging.getLogger("codebot.model")

# Tried, in this order, when a refusal names no field and the feature was never seen to work.
SUSPECTS = (TOOL_CHOICE_REQUIRED, PARALLEL_TOOL_CALLS, TOOL_CHOICE_NONE)


class RequestShaping(ServerFit):
    # --- the context window ------------------------------------------------------------------------
    def window(self) -> Window:
        tokens = self.settings.model_context_tokens
        if not tokens:
            self._discover_once()
            known = self.memory.context()
            tokens = known[0] if known else 0
        return Window(
            tokens=tokens,
            reserve_tokens=min(self.settings.model_answer_reserve_tokens, tokens // 4),
            chars_per_token=self.chars_per_token,
            max_chars=self.settings.context_budget_chars,
        )

    def _fallback(self, exc: Exception, features: set[str], suspected: set[str]) -> str | None:
        """The optional feature to leave out after this error, if any (remembered when named)."""
        refusal = refusal_of(exc)
        if refusal is None:
            return None
        for name in refusal.named:
            if name == "tool_choice":
                feature = next(
                    (f for f in (TOOL_CHOICE_REQUIRED, TOOL_CHOICE_AUTO, TOOL_CHOICE_NONE) if f in features),
                    None,
                )
            elif name == "content":
                feature = next((f for f in (EMPTY_CONTENT, ABSENT_CONTENT) if f in features), None)
            else:
                feature = name if name in features else None
            if feature is not None:
                self.memory.refuse(feature, refusal.text)
                return feature
        for feature in SUSPECTS:
            if feature in features and feature not in suspected and not self.memory.confirmed(feature):
                log.info(
                    "model endpoint error naming no field; trying without %s", feature, extra=self.log_extra
                )
                suspected.add(feature)
                return feature
        return None

    # --- shaping -----------------------------------------------------------------------------------------
    def _refused(self, feature: str, suspected: set[str]) -> bool:
        return self.memory.refuses(feature) or feature in suspected

    def _shape(
        self,
        messages: list[dict[str, Any]],
        question_at: int,
        tools: list[dict[str, Any]] | None,
        tool_choice: str | None,
        suspected: set[str],
    ) -> Shaped:
        features: set[str] = set()
        fold = False
        choice = tool_choice
        if choice == "required" and self._refused(TOOL_CHOICE_REQUIRED, suspected):
            choice = "auto"
        if choice == "auto" and self._refused(TOOL_CHOICE_AUTO, suspected):
            choice = None
        if choice == "none" and self._refused(TOOL_CHOICE_NONE, suspected):
            fold, choice, tools = True, None, None
        window = self.window()
        tools = fit_tools(tools, messages, question_at, window.budget_chars, keep=len(CONTRACT_TOOLS))
        try:
            fitted = fit(messages, tools, window.budget_chars, question_at)
        except ContextTooSmall as exc:
            tokens = f"{window.tokens:,}" if window.tokens else "configured"
            raise self._with_tokens(failure("context", str(exc), tokens=tokens)) from None
        wire = fold_tool_history(fitted) if fold else self._content_styled(fitted, features, suspected)
        kwargs: dict[str, Any] = {"model": self.settings.model, "messages": wire}
        if tools:
            kwargs["tools"] = tools
            if choice:
                kwargs["tool_choice"] = choice
                features.add(
                    {"required": TOOL_CHOICE_REQUIRED, "auto": TOOL_CHOICE_AUTO}.get(choice, TOOL_CHOICE_NONE)
                )
            if self.settings.max_tool_calls_per_turn == 1 and not self._refused(
                PARALLEL_TOOL_CALLS, suspected
            ):
                kwargs["parallel_tool_calls"] = False
                features.add(PARALLEL_TOOL_CALLS)
        if self.settings.model_stream and not self.memory.refuses(STREAM):
            kwargs["stream"] = True
            features.add(STREAM)
            if not self.memory.refuses(STREAM_OPTIONS):
                kwargs["stream_options"] = {"include_usage": True}
                features.add(STREAM_OPTIONS)
            if self.memory.facts.server_kind == LLAMA_CPP:
                # its prompt progress, streamed, for the waiting line (worker/agent/waiting.py);
                # llama.cpp's own field: no other server is sent one it may not know
                kwargs["return_progress"] = True
        cap = self._reply_cap(window)
        if cap:
            features.add(self._max_tokens_field())
        tool_chars = request_chars([], tools) if tools else 0
        return Shaped(kwargs, features, request_chars(wire, kwargs.get("tools")), cap, tool_chars)

    def _content_styled(
        self, messages: list[dict[str, Any]], features: set[str], suspected: set[str]
    ) -> list[dict[str, Any]]:
        """Assistant tool-call turns without text, in the form the endpoint accepts."""
        style = EMPTY_CONTENT
        if self._refused(EMPTY_CONTENT, suspected):
            style = ABSENT_CONTENT if not self._refused(ABSENT_CONTENT, suspected) else "null"
        out: list[dict[str, Any]] = []
        for message in messages:
            if (
                message.get("role") == "assistant"
                and message.get("tool_calls")
                and not message.get("content")
            ):
                message = {k: v for k, v in message.items() if k != "content"}
                if style == EMPTY_CONTENT:
                    message["content"] = ""
                elif style == "null":
                    message["content"] = None
                if style != "null":
                    features.add(style)
            out.append(message)
        return out
