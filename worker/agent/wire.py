"""The wire side of a model call: turns as data, reading completions, and the attempt watchdog.

- `ToolCall`, `ModelTurn`: one assembled model turn, whatever the server's format.
- `turn_from_json` reads a non-streamed chat.completion; `read_stream` a streamed one, its text
  deltas passed on as they arrive and its tool calls assembled by index (`add_fragment`,
  `calls_from`; docs/platform-notes.md §4).
- `Attempt` bounds one attempt's total time: when it is up, the socket its reply comes on is
  shut down, which wakes a read blocked on a server trickling a byte every few seconds (the
  SDK's timeouts are per read). It sees the socket through an httpx response hook
  (`install_watchdog`), so proxies and the SDK's own transport stay as they are. The
  process's one deadline thread (worker/ops/deadlines.py) fires every attempt whose time is
  up: a timer thread per attempt cost a thread start and a cancel per model call, with 64
  questions in flight in one process a sixth of the worker's busy time (py-spy, bench/agent.py).
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
from openai._streaming import ServerSentEvent  # the type of the SDK's `Stream._iter_events`

from config.settings import Settings
from worker.ops.deadlines import DEADLINES, Deadline


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text as the model sent it (may be invalid)


@dataclass
class ModelTurn:
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # the reply ended before the model finished it: a stream without a finish reason (a gateway
    # closing half-way), or the output limit ("length")
    cut_off: bool = False
    model: str = ""  # the model the server says answered (the reply's `model`), as sent


class EmptyStream(Exception):
    """A streamed reply that ended with nothing in it: the server cannot stream this request."""


class CutStream(Exception):
    """A streamed reply that ended without a finish reason: cut off, whatever it held so far."""

    def __init__(self, turn: ModelTurn) -> None:
        super().__init__("the model's streamed reply ended without a finish reason")
        self.turn = turn


# --- the attempt watchdog ------------------------------------------------------------------------

_ACTIVE = threading.local()


class Attempt:
    """One attempt's total time bound: when it is up, the connection the reply comes on is shut
    down, which wakes a read blocked on a server sending a byte every few seconds."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False
        self.replied = False  # the reply's headers arrived
        self.ended = False  # the attempt is over: its deadline no longer matters
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._deadline: Deadline | None = None

    def __enter__(self) -> Attempt:
        _ACTIVE.attempt = self
        self._deadline = DEADLINES.add(self.seconds, self.fire)
        return self

    def __exit__(self, *_exc: object) -> None:
        with self._lock:
            self.ended = True  # a firing from now on does nothing
            self._sockets = []  # closed by the pool or by us; not kept until the deadline
        if self._deadline is not None:
            DEADLINES.cancel(self._deadline)  # O(1): the deadline thread is not woken for it
            self._deadline = None
        _ACTIVE.attempt = None

    def register(self, response: httpx2.Response) -> None:
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        with self._lock:
            self.replied = True
            if isinstance(sock, socket.socket):
                self._sockets.append(sock)
                if self.fired:
                    _shut(sock)

    def fire(self) -> None:
        with self._lock:
            if self.ended:
                return  # it finished just in time
            self.fired = True
        self.drop_connection()

    def drop_connection(self) -> None:
        """Shut the reply's connection: the pool will not hand it out again."""
        with self._lock:
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    # the plain socket's shutdown: an SSLSocket's own would drop its TLS state under the reader
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _on_response(response: httpx2.Response) -> None:
    attempt: Attempt | None = getattr(_ACTIVE, "attempt", None)
    if attempt is not None:
        attempt.register(response)


class DrainedStream(openai.Stream[object]):
    """The SDK's stream of chunks (as the server's JSON), read to the end of the body.

    The SDK stops reading at `[DONE]` and closes the response with the body's last chunk
    unread, so the connection is dropped instead of going back to the pool: every streamed
    model call opened a new connection (a new TLS handshake on a hosted API). Reading the
    little that follows `[DONE]` first lets the next call reuse it. A server that keeps
    sending after `[DONE]` is cut by the attempt's watchdog like any slow reply."""

    def _iter_events(self) -> Iterator[ServerSentEvent]:
        events = super()._iter_events()
        for event in events:
            if event.data.startswith("[DONE]"):
                for _rest in events:
                    pass
            yield event


def install_watchdog(client: openai.OpenAI) -> None:
    """Let attempts see the connection of each reply (an httpx response hook, set once)."""
    http = getattr(client, "_client", None)
    if isinstance(http, httpx2.Client) and _on_response not in http.event_hooks["response"]:
        hooks = http.event_hooks
        http.event_hooks = {"request": hooks["request"], "response": [*hooks["response"], _on_response]}


def make_openai_client(settings: Settings) -> openai.OpenAI:
    """The SDK client for the configured endpoint; create it inside the job, never before a fork."""
    client = openai.OpenAI(
        # local servers ignore the key but the SDK wants one
        api_key=settings.openai_api_key.get_secret_value() if settings.openai_api_key else "not-needed",
        base_url=settings.openai_base_url,
        timeout=settings.model_timeout_seconds,
        max_retries=0,  # ModelClient retries, within the question's deadline
    )
    install_watchdog(client)
    return client


LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_text(text: str) -> str:
    """`text` as UTF-8 can hold it. JSON may escape half a UTF-16 pair ("\\ud800"), which
    Python decodes to a character no UTF-8 encoder takes: sent back to the model, posted to
    chat or written to Redis it would fail. It becomes U+FFFD, as a UTF-8 decoder shows it."""
    return LONE_SURROGATE.sub("\ufffd", text) if LONE_SURROGATE.search(text) else text


def fields(value: object) -> dict[str, Any]:
    """A JSON object's fields; none when it is anything else (a server may send any JSON)."""
    return value if isinstance(value, dict) else {}


def add_fragment(slots: dict[int, dict[str, str]], fragment: object) -> None:
    """Tool calls stream as fragments by index: the id and name come first, arguments in pieces."""
    data = fields(fragment)
    index = data.get("index")
    index = index if isinstance(index, int) else len(slots)
    slot = slots.setdefault(index, {"id": "", "name": "", "arguments": ""})
    if data.get("id"):
        slot["id"] = str(data["id"])
    function = fields(data.get("function"))
    name = function.get("name")
    if name and not slot["name"]:
        slot["name"] = str(name)
    arguments = function.get("arguments")
    if arguments:
        slot["arguments"] += utf8_text(str(arguments))


def calls_from(slots: dict[int, dict[str, str]]) -> list[ToolCall]:
    calls = []
    for index in sorted(slots):
        slot = slots[index]
        calls.append(
            ToolCall(
                id=slot["id"] or f"call_{index}_{random.getrandbits(32):08x}",
                name=slot["name"],
                arguments=slot["arguments"],
            )
        )
    return calls


def turn_from_json(body: bytes) -> ModelTurn:
    """A non-streamed chat.completion; ValueError when it is not one we can use."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"the reply is not JSON: {body[:200]!r}") from exc
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError(f"the reply had no choices: {body[:300]!r}")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ValueError(f"the reply had no message: {body[:300]!r}")
    calls = []
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        arguments = function.get("arguments")
        calls.append(
            ToolCall(
                id=str(call.get("id") or f"call_{index}_{random.getrandbits(32):08x}"),
                name=str(function.get("name") or ""),
                arguments=utf8_text(arguments) if isinstance(arguments, str) else json.dumps(arguments or {}),
            )
        )
    content = message.get("content")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return ModelTurn(
        content=utf8_text(content) if isinstance(content, str) else "",
        tool_calls=calls,
        finish_reason=choices[0].get("finish_reason"),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        model=_model_of(data),
    )


def _model_of(data: dict[str, Any]) -> str:
    model = data.get("model")
    return model if isinstance(model, str) else ""


def read_stream(stream: Any, on_text: Callable[[str], None]) -> ModelTurn:
    """A streamed chat.completion, each text delta given to `on_text` as it arrives. Raises
    EmptyStream when nothing came, CutStream when it ended without a finish reason."""
    response: httpx2.Response = stream.response
    if "text/event-stream" not in response.headers.get("content-type", ""):
        # the server ignored stream=True and answered in one piece (or sent garbage)
        turn = turn_from_json(response.read())
        if turn.content:
            on_text(turn.content)
        return turn
    text: list[str] = []
    slots: dict[int, dict[str, str]] = {}
    finish: str | None = None
    usage: dict[str, Any] = {}
    model = ""
    for chunk in stream:  # JSON as sent (Stream[object]): no model object built per chunk
        data = fields(chunk)
        usage = fields(data.get("usage")) or usage
        model = model or _model_of(data)
        choices = data.get("choices")
        for choice in choices if isinstance(choices, list) else []:  # the usage chunk has none
            choice = fields(choice)
            if (choice.get("index", 0) or 0) != 0:
                continue
            delta = fields(choice.get("delta"))
            content = delta.get("content")
            if isinstance(content, str) and content:
                content = utf8_text(content)
                text.append(content)
                on_text(content)
            calls = delta.get("tool_calls")
            for fragment in calls if isinstance(calls, list) else []:
                add_fragment(slots, fragment)
            reason = choice.get("finish_reason")
            finish = reason if isinstance(reason, str) and reason else finish
    if not text and not slots and finish is None:
        raise EmptyStream()
    turn = ModelTurn(content="".join(text), tool_calls=calls_from(slots), finish_reason=finish, model=model)
    if usage:
        turn.prompt_tokens = int(usage.get("prompt_tokens") or 0)
        turn.completion_tokens = int(usage.get("completion_tokens") or 0)
    if finish is None:
        # Every server ends a whole reply with a finish reason; a stream that ends without
        # one (`[DONE]` or not) was cut: a gateway or connection closing half-way.
        raise CutStream(turn)
    return turn
