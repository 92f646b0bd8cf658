"""Model endpoint failures: what kind each is, what the asker is told, what an admin can read.

`ModelFailure` carries a `kind` (the asker's apology says which), the server's own error text
(`detail`: trimmed and redacted, for the log under the question's reference id and for
`codebot status`), and what the question had done so far, so a failed question is accounted
for the hops, tool calls and tokens it really used.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import openai

from worker.agent.endpoint_memory import (
    MAX_COMPLETION_TOKENS,
    MAX_TOKENS,
    PARALLEL_TOOL_CALLS,
    STREAM,
    STREAM_OPTIONS,
    TOOL_CHOICE_AUTO,
    TOOL_CHOICE_NONE,
    TOOL_CHOICE_REQUIRED,
)
from worker.tools.redact import get_redactor

DETAIL_MAX_CHARS = 500
CONTEXT_HELP = (
    "give the model server a larger context window (Ollama: OLLAMA_CONTEXT_LENGTH=16384; "
    "llama.cpp: -c 16384; llama-cpp-python: --n_ctx 16384; vLLM: --max-model-len), "
    "or point codebot at a model with a larger one"
)

# kind -> what the asker reads after "Sorry, I could not answer: "
MESSAGES = {
    "auth": "the model endpoint refused the API key (401): check OPENAI_API_KEY",
    "model_not_found": "the model endpoint does not know this model (404): check CODEBOT_MODEL and OPENAI_BASE_URL",
    "rate_limited": "the model endpoint kept rate-limiting us (429)",
    "timeout": "the model endpoint did not answer in time",
    "cut": "the model endpoint was still sending its reply when its time ran out ({seconds:.0f} s), so it was cut off",
    "unreachable": "the model endpoint could not be reached",
    "server_error": "the model endpoint failed (HTTP {status})",
    "refused": "the model endpoint refused the request (HTTP {status}); an admin can read its reason in `codebot status`",
    "context": "the model's context window ({tokens} tokens) is too small for the question and codebot's instructions: "
    + CONTEXT_HELP,
    "malformed": "the model endpoint sent a reply we could not use",
    # followed by what would fit (ADVICE), or else by DEADLINE_HELP
    "deadline": "the question's time ({seconds:.0f} s) ran out before any code was read",
    # a tool call given up at the question's deadline (worker/agent/tool_pool.py)
    "tool_stuck": "{what} did not return within {seconds:g} s: the disk or mount the worker reads "
    "the code from may be stuck (an operator can check it; `codebot status` counts the stuck calls)",
    "tool_not_started": "{what} could not start within {seconds:g} s: every tool thread of this worker "
    "is stuck on a read that never returned (the disk or a mount may be hung): an operator should check "
    "it and restart the worker",
    # said to the asker from where it was learned (worker/jobs/texts.py TOOLS_UNSEEN); this for logs
    "tools_unseen": "the model endpoint does not show the model its tools, so codebot did not ask it",
    "no_tool_calls": "the model never made a usable tool call, so no code was read: it may not support tool "
    "calling on this server (an admin can read why in `codebot status`)",
}
DEADLINE_HELP = "an operator can raise CODEBOT_QUESTION_DEADLINE_SECONDS or use a faster model"

# What an apology for a slow endpoint advises, from the measured speeds (worker/agent/time_advice.py).
_FASTER = "use a faster server (a GPU) or a faster model (docs/models.md)"
ADVICE = {
    "needs": "one turn here needs {turn_time} ({reading}writing up to {tokens:,} tokens at {speed:,.1f} "
    "tokens/s), and a question at least {turns} turns",
    "reading": "reading ~{tokens:,} prompt tokens at {speed:,.0f} tokens/s, then ",
    "fits": "{needs}, which CODEBOT_QUESTION_DEADLINE_SECONDS holds already: the time went to more "
    "turns than that, so a longer deadline is not the fix; a narrower question or a faster model is",
    "max_tokens": "{needs}: set CODEBOT_MODEL_MAX_TOKENS={tokens} ({turn_time} a turn), which fits "
    "the deadline set now",
    "max_tokens_and_deadline": "{needs}: set CODEBOT_MODEL_MAX_TOKENS={tokens} ({turn_time} a turn) "
    "and CODEBOT_QUESTION_DEADLINE_SECONDS={seconds}",
    "deadline": "{needs}: set CODEBOT_QUESTION_DEADLINE_SECONDS={seconds}",
    "window": "{needs}: the model's context window ({window:,} tokens) leaves {room:,} for a reply "
    "after the prompt: start the model server with a window of {tokens:,} (llama.cpp: -c {tokens}; "
    "Ollama: OLLAMA_CONTEXT_LENGTH={tokens}){extra}",
    "and_set": ", and set {settings}",
    "no_fit_prompt": "{needs}: no setting makes a question fit here, as reading the prompt alone "
    "takes {prompt_time}: " + _FASTER,
    "no_fit_writing": "{needs}: no setting makes a question fit here, as even a {tokens}-token "
    "reply takes {turn_time} a turn: " + _FASTER,
}


class ModelFailure(Exception):
    """The model endpoint failed in a way no retry fixed; str() is safe to show the asker."""

    def __init__(
        self,
        message: str,
        *,
        kind: str = "server_error",
        detail: str = "",
        status: int | None = None,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.detail = detail  # the server's own words, trimmed and redacted: for logs and admins
        self.status = status
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.hops = 0
        self.tool_calls = 0
        self.tools: Counter[str] = Counter()
        self.evidence = ""  # kind "tools_unseen": where that was learned (TOOLS_UNSEEN_FROM_*)

    def accounting(self) -> dict[str, Any]:
        """The facts a question's log line and usage accounting need."""
        return {
            "hops": self.hops,
            "tool_calls": self.tool_calls,
            "tools": dict(self.tools),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "failure_kind": self.kind,
        }


def failure(kind: str, detail: str = "", status: int | None = None, **values: Any) -> ModelFailure:
    message = MESSAGES[kind].format(status=status, **values)
    return ModelFailure(message, kind=kind, detail=detail, status=status)


def clean_detail(text: str) -> str:
    """A server's error text as admins may read it: one line, trimmed, secrets redacted."""
    one_line = " ".join(text.split())
    if len(one_line) > DETAIL_MAX_CHARS:
        one_line = one_line[: DETAIL_MAX_CHARS - 1] + "…"
    return get_redactor().redact(one_line)


def error_text(exc: openai.APIStatusError) -> str:
    """What the server said: the error's message, else the raw body."""
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, dict) else error
        if isinstance(message, str) and message.strip():
            return message
        return json.dumps(body)[:2000]
    try:
        return exc.response.text[:2000]
    except Exception:  # a streamed body that was never read
        return str(exc)


def classify(exc: Exception) -> ModelFailure:
    """A ModelFailure for an exception of the openai client (or anything else)."""
    if isinstance(exc, ModelFailure):
        return exc
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = clean_detail(error_text(exc))
        if status == 401:
            return failure("auth", detail, status)
        if status == 404:
            return failure("model_not_found", detail, status)
        if status == 429:
            return failure("rate_limited", detail, status)
        if status in (400, 403, 413, 422):
            return failure("refused", detail, status)
        return failure("server_error", detail, status)
    if isinstance(exc, openai.APITimeoutError):
        return failure("timeout", "no reply before the attempt's time limit")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        return failure("unreachable", clean_detail(f"{type(cause).__name__}: {cause}" if cause else str(exc)))
    return failure("malformed", clean_detail(f"{type(exc).__name__}: {exc}"))


# --- what a refusal names ------------------------------------------------------------------------

REFUSAL_STATUSES = (400, 422, 500, 501)
# Checked in this order: the more specific names first ("stream_options" before "stream").
_FIELD_PATTERNS = (
    (STREAM_OPTIONS, re.compile(r"stream_options|include_usage", re.IGNORECASE)),
    (MAX_COMPLETION_TOKENS, re.compile(r"max_completion_tokens", re.IGNORECASE)),
    (MAX_TOKENS, re.compile(r"\bmax_tokens\b", re.IGNORECASE)),
    (PARALLEL_TOOL_CALLS, re.compile(r"parallel[_ ]tool[_ ]calls", re.IGNORECASE)),
    ("tool_choice", re.compile(r"tool[_ ]choice", re.IGNORECASE)),
    (STREAM, re.compile(r"\bstream(ing)?\b", re.IGNORECASE)),
    ("content", re.compile(r"\bcontent\b", re.IGNORECASE)),
)


@dataclass
class Refusal:
    status: int
    text: str  # the server's own words, cleaned
    named: list[str] = field(default_factory=list)  # request fields the text names


def refusal_of(exc: Exception) -> Refusal | None:
    """A 400/422/500/501 answer to a request, with the fields its text names; None otherwise."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in REFUSAL_STATUSES:
        return None
    raw = error_text(exc)
    named = [name for name, pattern in _FIELD_PATTERNS if pattern.search(raw)]
    return Refusal(exc.status_code, clean_detail(raw), named)


def tool_choice_feature(value: str | None) -> str | None:
    return {"required": TOOL_CHOICE_REQUIRED, "auto": TOOL_CHOICE_AUTO, "none": TOOL_CHOICE_NONE}.get(
        value or ""
    )


# --- "maximum context length" errors -----------------------------------------------------------------

_CONTEXT_HINT = re.compile(
    r"context[_ ]length|context window|context size|maximum context|max_model_len|too many tokens|"
    r"exceeds? the (available )?context|n_ctx",
    re.IGNORECASE,
)
_WINDOW_PATTERNS = (
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),  # OpenAI, vLLM, llama-cpp-python
    re.compile(r"context window of (\d+)", re.IGNORECASE),
    re.compile(r"context (?:size|length) of (?:only )?(\d+)", re.IGNORECASE),  # LM Studio
    re.compile(r"available context size \((\d+) tokens\)", re.IGNORECASE),  # llama-server
    re.compile(r'"n_ctx"\s*:\s*(\d+)'),  # llama-server's error body
)
_PROMPT_TOKENS = re.compile(r"\((\d+) in the messages|n_prompt_tokens\"\s*:\s*(\d+)", re.IGNORECASE)


@dataclass
class ContextOverflow:
    window_tokens: int | None  # the window the server named, if it did
    prompt_tokens: int | None  # what it counted for our messages, if it said


def context_overflow_of(exc: Exception) -> ContextOverflow | None:
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 413, 422, 500):
        return None
    raw = error_text(exc)
    if isinstance(exc.body, dict):
        raw += " " + json.dumps(exc.body)
    code = exc.body.get("code") if isinstance(exc.body, dict) else None
    if code != "context_length_exceeded" and not _CONTEXT_HINT.search(raw):
        return None
    window = next((int(m.group(1)) for p in _WINDOW_PATTERNS if (m := p.search(raw))), None)
    counted = _PROMPT_TOKENS.search(raw)
    prompt = int(counted.group(1) or counted.group(2)) if counted else None
    return ContextOverflow(window, prompt)
