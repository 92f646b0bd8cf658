"""What the scripted model server (tests/support/model_server.py) says: the replies a test
scripts, the refusals of strict servers, token counts and streamed chunks. Pure functions of
the request body; the server in model_server.py sends them over the wire.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal

NO_REPLY_MESSAGE = "ScriptedModel: no reply scripted"
DEFAULT_MODEL = "scripted-model"

Handler = Callable[[dict[str, Any]], "Reply | None"]

_ERROR_TYPES: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    408: ("server_error", "timeout"),
    409: ("server_error", "conflict"),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
}


# --------------------------------------------------------------------------------------
# Replies
# --------------------------------------------------------------------------------------


_SURROGATE = re.compile("[\ud800-\udfff]")


def wire_json(value: Any) -> str:
    """JSON as a server puts it on the wire: UTF-8 text. A lone surrogate (fuzzed tool arguments
    hold them) becomes U+FFFD, as a real server's text, decoded from the model's UTF-8 bytes,
    can never hold one."""
    return _SURROGATE.sub("\ufffd", json.dumps(value, ensure_ascii=False))


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Build it with ``text``, ``tool_calls``, ``error``, ``raw`` or ``slow``.

    A ``completion`` is rendered per request (ids, ``model`` echoed from the request, usage);
    ``error`` and ``raw`` bodies are sent as they are.
    """

    kind: Literal["completion", "error", "raw", "hang_up"]
    status: int = 200
    content: str | None = None
    calls: tuple[tuple[str, str], ...] = ()  # (function name, arguments JSON string)
    finish_reason: str = "stop"
    body: str = ""  # error/raw only
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0  # seconds to sleep before answering
    trickle: float = 0.0  # seconds between the bytes of the body (0: all at once)
    pace: float = 0.0  # seconds between the events of a streamed reply
    # a streamed reply cut half-way, without its finish reason: then "[DONE]" and a clean end of
    # the chunked body ("done"), or nothing more and the connection closed ("close": a
    # connection-close body, as a gateway that gives up sends). Not streamed: the JSON cut in two.
    cut: Literal["", "done", "close"] = ""
    prompt_tokens: int = 0  # usage.prompt_tokens as reported (0: this server's own count, tokens_of)
    held: threading.Event | None = None  # streamed: the rest waits for this after the first piece
    gates: tuple[threading.Event, ...] = ()  # nothing is answered until each is set, in turn
    reading: int = 0  # with gates, and asked for `return_progress`: the prompt progress streamed meanwhile


def text(content: str, *, finish_reason: str = "stop") -> Reply:
    """An assistant text answer (``finish_reason`` "stop", or e.g. "length" to script truncation)."""
    return Reply(kind="completion", content=content, finish_reason=finish_reason)


def tool_calls(*calls: tuple[str, dict[str, Any] | str], content: str | None = None) -> Reply:
    """An assistant turn calling tools; several calls = parallel tool calls.

    A dict of arguments is JSON-encoded; a str is sent verbatim (to script malformed JSON).
    Ids are ``call_<n>``, unique per server, assigned when the reply is sent.
    """
    if not calls:
        raise ValueError("tool_calls() needs at least one (name, arguments) pair")
    encoded: list[tuple[str, str]] = []
    for name, arguments in calls:
        if isinstance(arguments, str):
            encoded.append((name, arguments))
        else:
            encoded.append((name, wire_json(arguments)))
    return Reply(kind="completion", content=content, calls=tuple(encoded), finish_reason="tool_calls")


def error(
    status: int,
    body: dict[str, Any] | str | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """An HTTP error the SDK maps to its exception classes (429 → RateLimitError, ...).

    ``body``: a dict is sent as the JSON body; a str becomes ``{"error": {"message": str, ...}}``;
    None gives an OpenAI-shaped default error for the status. Use ``raw`` for verbatim bodies.
    """
    if not 400 <= status <= 599:
        raise ValueError(f"error() needs a 4xx/5xx status, got {status}")
    if isinstance(body, dict):
        payload: dict[str, Any] = body
    else:
        kind, code = _ERROR_TYPES.get(status, ("server_error", None))
        message = body if body is not None else f"ScriptedModel: scripted error {status}"
        payload = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return Reply(
        kind="error",
        status=status,
        body=json.dumps(payload),
        headers=tuple((headers or {}).items()),
    )


def raw(body: str, status: int = 200, content_type: str = "application/json") -> Reply:
    """A verbatim body (malformed JSON, HTML error pages, wrong shapes...)."""
    return Reply(kind="raw", status=status, body=body, content_type=content_type)


def hang_up() -> Reply:
    """The connection closed with no response at all: what a client sees when it sends on a
    pooled keep-alive connection the server had just dropped."""
    return Reply(kind="hang_up")


def slow(delay: float, then: Reply) -> Reply:
    """``then``, answered after ``delay`` seconds (other requests are served meanwhile)."""
    if delay < 0:
        raise ValueError("slow() needs a non-negative delay")
    return replace(then, delay=then.delay + delay)


def trickle(seconds_per_byte: float, then: Reply) -> Reply:
    """``then``, its body sent one byte every ``seconds_per_byte`` (headers at once)."""
    if seconds_per_byte <= 0:
        raise ValueError("trickle() needs a positive interval")
    return replace(then, trickle=seconds_per_byte)


def cut_stream(then: Reply, *, done: bool) -> Reply:
    """``then`` cut half-way through its text, with no finish reason; ``done``: "[DONE]" still
    comes (a gateway ending the stream cleanly), else the connection just closes."""
    if then.kind != "completion":
        raise ValueError("cut_stream() cuts a completion (text or tool_calls)")
    return replace(then, cut="done" if done else "close")


def answers_after_reading(answer: str, call: tuple[str, dict[str, Any]] = ("list_repos", {})) -> Handler:
    """A model that reads before it answers, for any number of questions: a turn after a tool
    result is ``answer``; any other turn makes ``call`` (an answer needs code read)."""

    def reply(body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or [{}]
        return text(answer) if messages[-1].get("role") == "tool" else tool_calls(call)

    return reply


def ignores_tools(prose: str) -> Handler:
    """A server whose chat template drops ``tools`` and ignores ``tool_choice`` (llama.cpp's with
    some models): every request gets the same prose, never a tool call."""
    return lambda _body: text(prose)


def made_up_repos(repo: str = "acme-core", prose: str = "It is in the core module.") -> Handler:
    """A model that makes up a repo name: every turn that may call tools searches ``repo``; a
    turn that may not (tool_choice "none", or no tools) writes ``prose``."""

    def reply(body: dict[str, Any]) -> Reply:
        if not body.get("tools") or body.get("tool_choice") == "none":
            return text(prose)
        return tool_calls(("search", {"pattern": "retry", "repo": repo}))

    return reply


def held_mid_stream(released: threading.Event, then: Reply) -> Reply:
    """``then``, streamed: its first piece (text or a tool call's first fragment) at once, the
    rest only once ``released`` is set (a reply the model is still writing)."""
    return replace(then, held=released)


def held_before_answering(gates: tuple[threading.Event, ...], then: Reply, reading: int = 0) -> Reply:
    """``then``, answered only once every gate is set, in turn: a server still reading the prompt.
    A streamed request with ``"return_progress": true`` (llama.cpp's field) gets llama.cpp's
    ``prompt_progress`` chunks meanwhile, of ``reading`` tokens: 0 read at once, then a step more
    as each gate is set (all read after the last)."""
    return replace(then, gates=then.gates + gates, reading=reading)


def progress_events(completion: dict[str, Any], total: int, steps: int) -> list[str]:
    """llama.cpp's prompt progress chunks: 0 of ``total`` read, then ``steps`` even steps to all."""
    base = {k: completion[k] for k in ("id", "created", "model", "system_fingerprint")}
    choice = {"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}
    return [
        json.dumps(
            {
                **base,
                "object": "chat.completion.chunk",
                "choices": [choice],
                "prompt_progress": {
                    "total": total,
                    "cache": 0,
                    "processed": total * step // steps,
                    "time_ms": step,
                },
            }
        )
        for step in range(steps + 1)
    ]


def under_counted(prompt_tokens: int, then: Reply) -> Reply:
    """``then``, its ``usage.prompt_tokens`` said to be ``prompt_tokens``: a proxy or gateway that
    counts only part of the prompt (the messages, not the tool schemas)."""
    return replace(then, prompt_tokens=prompt_tokens)


def paced(interval: float, then: Reply) -> Reply:
    """``then``; when streamed, ``interval`` seconds pass between its events."""
    if interval < 0:
        raise ValueError("paced() needs a non-negative interval")
    return replace(then, pace=interval)


# What strict or odd servers answer, by mode: (status, error message, what triggers it).
# The messages are the real servers' (or close to them), so that detection is tested on the
# words a user's server would send.
STRICT_MODES: dict[str, str] = {
    # llama-cpp-python's pydantic schema: assistant content must be a string
    "null_content": "an assistant message with content null -> 500",
    # llama-cpp-python's jinja template reads message.content
    "absent_content": "an assistant message without content -> 500",
    # some proxies (Anthropic-backed routes) want non-empty text blocks
    "empty_content": 'an assistant message with content "" -> 400',
    "tool_choice_required": 'tool_choice="required" -> 400 naming tool_choice',
    # llama-cpp-python: an assertion, HTTP 500 with an empty message
    "tool_choice_required_silent": 'tool_choice="required" -> 500 with no error text',
    # vLLM without --enable-auto-tool-choice
    "tool_choice_auto": 'tool_choice="auto" (or tools without tool_choice) -> 400',
    "tool_choice_none": 'tool_choice="none" -> 400',
    "parallel_tool_calls": "parallel_tool_calls -> 400",
    "stream_options": "stream_options -> 400",
    "stream": "stream=true -> 400",
    # llama-cpp-python: 200, then the stream ends with nothing in it
    "stream_with_tools_empty": "stream=true with tools -> 200 and an empty event stream",
    "tools_with_tool_history": "tool messages in the history but no tools listed -> 400",
}


# --------------------------------------------------------------------------------------
# Helpers on request bodies
# --------------------------------------------------------------------------------------


def _content_text(content: object) -> list[str]:
    """The text of a message ``content``: a string, or a list of parts ({"type": "text", "text"})."""
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                for key in ("text", "refusal"):
                    value = part.get(key)
                    if isinstance(value, str):
                        out.append(value)
    return out


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last ``role: "user"`` message in a request body ("" if none)."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return "\n".join(_content_text(message.get("content")))
    return ""


def message_texts(message: object) -> Iterator[str]:
    if not isinstance(message, dict):
        return
    yield from _content_text(message.get("content"))
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            for key in ("name", "arguments"):
                value = function.get(key)
                if isinstance(value, str):
                    yield value


# --------------------------------------------------------------------------------------
# Strict servers, token counts, streamed chunks
# --------------------------------------------------------------------------------------


def refusal(strict: frozenset[str], body: dict[str, Any]) -> tuple[int, str] | None:
    """(status, error message) when a strict mode refuses this request; (200, "") for an
    empty event stream."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        if "null_content" in strict and "content" in message and message["content"] is None:
            return 500, (
                f"1 validation error: {{'type': 'string_type', 'loc': ('body', 'messages', {index}, "
                "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid string'}"
            )
        if "absent_content" in strict and "content" not in message:
            return 500, "'dict object' has no attribute 'content'"
        if "empty_content" in strict and message.get("content") == "":
            return 400, f"messages.{index}.content: text content blocks must be non-empty"
    choice = body.get("tool_choice")
    if choice == "required" and "tool_choice_required" in strict:
        return 400, "tool_choice 'required' is not supported by this server; use 'auto' or 'none'"
    if choice == "required" and "tool_choice_required_silent" in strict:
        return 500, ""
    if "tool_choice_auto" in strict and body.get("tools") and choice in ("auto", None):
        return (
            400,
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        )
    if choice == "none" and "tool_choice_none" in strict:
        return 400, "tool_choice 'none' is not supported"
    if "parallel_tool_calls" in body and "parallel_tool_calls" in strict:
        return 400, "Unrecognized request argument supplied: parallel_tool_calls"
    if "stream_options" in body and "stream_options" in strict:
        return 400, "Unrecognized request argument supplied: stream_options"
    if body.get("stream") and "stream" in strict:
        return 400, "Streaming is not supported by this server"
    if body.get("stream") and body.get("tools") and "stream_with_tools_empty" in strict:
        return 200, ""
    has_tool_history = any(m.get("role") == "tool" or m.get("tool_calls") for m in messages)
    if has_tool_history and not body.get("tools") and "tools_with_tool_history" in strict:
        return 400, "messages contain tool calls, but no tools were given: add the tools parameter"
    return None


def tokens_of(body: dict[str, Any]) -> int:
    """This server's token count of a request: a token per 4 characters of its text (message
    contents, tool calls) and of its tool schemas, as chat templates render them."""
    chars = sum(len(text) for message in body.get("messages") or [] for text in message_texts(message))
    tools = body.get("tools")
    return (chars + (len(json.dumps(tools)) if tools else 0)) // 4


def stream_events(completion: dict[str, Any], body: dict[str, Any], reply: Reply) -> list[str]:
    """The reply as chat.completion.chunk payloads (JSON text), then "[DONE]"."""
    base = {k: completion[k] for k in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return wire_json({**base, "choices": [choice], "usage": None})

    message = completion["choices"][0]["message"]
    events = [chunk({"role": "assistant", "content": ""})]
    content = reply.content or ""
    if reply.cut:
        content = content[: len(content) // 2]
    for start in range(0, len(content), 5):  # token-sized pieces
        events.append(chunk({"content": content[start : start + 5]}))
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        first = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": function["name"], "arguments": ""},
        }
        events.append(chunk({"tool_calls": [first]}))
        arguments = function["arguments"]
        half = max(1, len(arguments) // 2)
        for piece in (arguments[:half], arguments[half:]):
            if piece:
                events.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    if reply.cut:
        return events + (["[DONE]"] if reply.cut == "done" else [])
    events.append(chunk({}, reply.finish_reason))
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        events.append(json.dumps({**base, "choices": [], "usage": completion["usage"]}))
    events.append("[DONE]")
    return events


def completion(body: dict[str, Any], reply: Reply, next_id: Callable[[str], str]) -> dict[str, Any]:
    """A chat.completion object for ``reply`` (ids from ``next_id(prefix)``, usage from tokens_of)."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.content,
        "refusal": None,
        "annotations": [],
    }
    if reply.calls:
        message["tool_calls"] = [
            {"id": next_id("call_"), "type": "function", "function": {"name": name, "arguments": args}}
            for name, args in reply.calls
        ]
    prompt_tokens = reply.prompt_tokens or max(1, tokens_of(body))
    produced = (reply.content or "") + "".join(name + args for name, args in reply.calls)
    completion_tokens = max(1, len(produced) // 4)
    return {
        "id": next_id("chatcmpl-scripted-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or DEFAULT_MODEL,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        "service_tier": "default",
        "system_fingerprint": "fp_scripted",
    }
