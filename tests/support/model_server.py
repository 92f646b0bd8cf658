"""A scripted, local OpenAI-compatible model server for tests.

The worker's tool loop runs the real ``openai`` client (3.x, on ``httpx2``). Patching
transports is fragile across SDK majors (docs/platform-notes.md §4: mocks for ``httpx`` may not
intercept ``httpx2``), so tests point the real client at a real HTTP server on loopback
instead::

    with ScriptedModel() as model:
        model.enqueue(tool_calls(("read_file", {"path": "README.md"})), text("It says hi."))
        client = openai.OpenAI(base_url=model.base_url, api_key="test", max_retries=0)
        ...
        assert "README" in model.requests[0]["messages"][-1]["content"]

Replies are taken FIFO from the queue; when the queue is empty the handler (``default`` or
``set_handler``) is asked; when there is none either, the server answers 500
"ScriptedModel: no reply scripted" so an under-scripted test fails loudly. Every request
body and its headers are recorded, including the ones answered with errors.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

__all__ = [
    "NO_REPLY_MESSAGE",
    "Reply",
    "ScriptedModel",
    "error",
    "last_user_text",
    "raw",
    "slow",
    "text",
    "tool_calls",
]

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


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Build it with ``text``, ``tool_calls``, ``error``, ``raw`` or ``slow``.

    A ``completion`` is rendered per request (ids, ``model`` echoed from the request, usage);
    ``error`` and ``raw`` bodies are sent as they are.
    """

    kind: Literal["completion", "error", "raw"]
    status: int = 200
    content: str | None = None
    calls: tuple[tuple[str, str], ...] = ()  # (function name, arguments JSON string)
    finish_reason: str = "stop"
    body: str = ""  # error/raw only
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0  # seconds to sleep before answering


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
            encoded.append((name, json.dumps(arguments, ensure_ascii=False)))
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


def slow(seconds: float, then: Reply) -> Reply:
    """``then``, answered after ``seconds`` (other requests are served meanwhile)."""
    if seconds < 0:
        raise ValueError("slow() needs a non-negative delay")
    return replace(then, delay=then.delay + seconds)


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


def _message_texts(message: object) -> Iterator[str]:
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
# The server
# --------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    model: ScriptedModel


class _RequestHandler(BaseHTTPRequestHandler):
    # Headers and body go out in separate writes; with Nagle on, each answer waits ~40 ms
    # for a delayed ACK.
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"  # keep-alive, like the real API; the SDK pools connections
    server_version = "ScriptedModel/1.0"
    timeout = 30  # a stuck client cannot pin a handler thread forever
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.model._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.model._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep pytest output clean

    # -- plumbing ----------------------------------------------------------------------

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is not None:
            return self.rfile.read(int(length))
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        return b""

    def _send(
        self,
        status: int,
        body: str,
        content_type: str = "application/json",
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        data = body.encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-request-id", self.server.model._next_id("req_"))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            # The client gave up (timeout) or the server is closing: nothing to answer.
            self.close_connection = True

    def _send_error_json(self, status: int, message: str, kind: str = "server_error") -> None:
        payload = {"error": {"message": message, "type": kind, "param": None, "code": None}}
        self._send(status, json.dumps(payload))

    # -- routes ------------------------------------------------------------------------

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/v1/models":
            models = [self.server.model._model_object(name) for name in self.server.model.model_ids()]
            self._send(200, json.dumps({"object": "list", "data": models}))
        elif path.startswith("/v1/models/"):
            self._send(200, json.dumps(self.server.model._model_object(path.rsplit("/", 1)[1])))
        else:
            self._send_error_json(
                404, f"ScriptedModel: unknown route GET {self.path}", "invalid_request_error"
            )

    def do_POST(self) -> None:
        started = time.perf_counter()
        try:
            self._do_post()
        finally:
            self.server.model._add_busy(time.perf_counter() - started)

    def _do_post(self) -> None:
        raw_body = self._read_body()
        path = self.path.split("?", 1)[0].rstrip("/")
        model = self.server.model
        if path != "/v1/chat/completions":
            model._fail(f"unknown route POST {self.path}")
            self._send_error_json(
                404, f"ScriptedModel: unknown route POST {self.path}", "invalid_request_error"
            )
            return
        try:
            body = json.loads(raw_body or b"{}")
            if not isinstance(body, dict):
                raise ValueError("request body is not a JSON object")
        except ValueError as exc:
            body = {"_unparsed_body": raw_body.decode("utf-8", "replace")}
            model._record(body, self.headers.items())
            model._fail(f"bad request body: {exc}")
            self._send_error_json(400, f"ScriptedModel: bad request body: {exc}", "invalid_request_error")
            return
        model._record(body, self.headers.items())
        if body.get("stream"):
            model._fail("streaming requested")
            self._send_error_json(
                400,
                "ScriptedModel: stream=True is not supported (non-streaming only)",
                "invalid_request_error",
            )
            return
        try:
            reply = model._next_reply(body)
        except Exception as exc:  # a broken handler must fail the test, not hang it
            model._fail(f"handler raised {exc!r}")
            self._send_error_json(500, f"ScriptedModel: handler raised {exc!r}")
            return
        if reply is None:
            model._fail(NO_REPLY_MESSAGE)
            self._send_error_json(500, NO_REPLY_MESSAGE)
            return
        if reply.delay > 0 and model._closed.wait(reply.delay):
            self.close_connection = True
            return  # closing: drop the request unanswered
        if reply.kind == "completion":
            self._send(
                200, json.dumps(model._completion(body, reply), ensure_ascii=False), headers=reply.headers
            )
        else:
            self._send(reply.status, reply.body, reply.content_type, reply.headers)


class ScriptedModel:
    """A real HTTP server on 127.0.0.1 (random free port) in a background thread, speaking
    POST /v1/chat/completions (non-streaming JSON chat.completion objects) and GET /v1/models.

    ``requests``/``headers`` grow together (same index = same request); header names are
    lower-cased. The handler may run concurrently on several server threads.
    """

    def __init__(self, default: Reply | Handler | None = None) -> None:
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._queue: deque[Reply] = deque()
        self._handler: Handler | None = None
        if isinstance(default, Reply):
            fixed = default
            self._handler = lambda _body: fixed
        elif default is not None:
            self._handler = default
        self._counters: dict[str, itertools.count[int]] = {}
        self._connections: set[socket.socket] = set()
        self._closed = threading.Event()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.failures: list[str] = []  # server-side problems: unscripted requests, handler errors...
        # seconds spent inside the server answering chat requests (benchmarks subtract "model time")
        self.busy_seconds = 0.0

        self._server = _Server(("127.0.0.1", 0), _RequestHandler)
        self._server.model = self
        self.port: int = self._server.server_address[1]
        self.base_url: str = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="ScriptedModel",
            daemon=True,
        )
        self._thread.start()

    # -- scripting ---------------------------------------------------------------------

    def _add_busy(self, seconds: float) -> None:
        with self._lock:
            self.busy_seconds += seconds

    def enqueue(self, *replies: Reply) -> None:
        """Append replies; each chat request pops the next one (FIFO)."""
        for reply in replies:
            if not isinstance(reply, Reply):
                raise TypeError(f"enqueue() takes Reply objects, got {type(reply).__name__}")
        with self._lock:
            self._queue.extend(replies)

    def set_handler(self, fn: Handler) -> None:
        """Answer with ``fn(request_body)`` whenever the queue is empty (None → unscripted 500)."""
        with self._lock:
            self._handler = fn

    @property
    def pending(self) -> int:
        """Scripted replies not consumed yet (assert ``== 0`` to check a test used its whole script)."""
        with self._lock:
            return len(self._queue)

    # -- inspection --------------------------------------------------------------------

    def wait_for_requests(self, n: int, timeout: float = 10) -> None:
        """Block until at least ``n`` chat requests arrived; TimeoutError otherwise."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.requests) >= n, timeout=timeout):
                raise TimeoutError(
                    f"ScriptedModel: expected {n} requests within {timeout}s, got {len(self.requests)}"
                )

    def all_text_sent(self) -> str:
        """Every message content, tool result and tool-call argument sent to the model, joined by newlines."""
        with self._lock:
            bodies = list(self.requests)
        parts: list[str] = []
        for body in bodies:
            unparsed = body.get("_unparsed_body")
            if isinstance(unparsed, str):
                parts.append(unparsed)
            for message in body.get("messages") or []:
                parts.extend(_message_texts(message))
        return "\n".join(parts)

    def model_ids(self) -> list[str]:
        """Model names for GET /v1/models: the default one plus every model requested so far."""
        with self._lock:
            seen = [str(body["model"]) for body in self.requests if isinstance(body.get("model"), str)]
        return list(dict.fromkeys([DEFAULT_MODEL, *seen]))

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Stop serving; pending slow() replies are dropped. Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._server.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:  # wake keep-alive handler threads blocked on read
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedModel:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ScriptedModel({self.base_url!r}, requests={len(self.requests)}, pending={self.pending})"

    # -- internals (called from server threads) ----------------------------------------

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            counter = self._counters.setdefault(prefix, itertools.count(1))
            return f"{prefix}{next(counter)}"

    def _record(self, body: dict[str, Any], headers: list[tuple[str, str]]) -> None:
        merged: dict[str, str] = {}
        for name, value in headers:
            key = name.lower()
            merged[key] = f"{merged[key]}, {value}" if key in merged else value
        with self._arrived:
            self.requests.append(body)
            self.headers.append(merged)
            self._arrived.notify_all()

    def _fail(self, reason: str) -> None:
        with self._lock:
            self.failures.append(reason)

    def _next_reply(self, body: dict[str, Any]) -> Reply | None:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            handler = self._handler
        return handler(body) if handler is not None else None  # outside the lock: may block

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.content,
            "refusal": None,
            "annotations": [],
        }
        if reply.calls:
            message["tool_calls"] = [
                {
                    "id": self._next_id("call_"),
                    "type": "function",
                    "function": {"name": name, "arguments": args},
                }
                for name, args in reply.calls
            ]
        prompt_tokens = max(1, len(json.dumps(body.get("messages") or [])) // 4)
        produced = (reply.content or "") + "".join(name + args for name, args in reply.calls)
        completion_tokens = max(1, len(produced) // 4)
        return {
            "id": self._next_id("chatcmpl-scripted-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or DEFAULT_MODEL,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish_reason}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
            "service_tier": "default",
            "system_fingerprint": "fp_scripted",
        }

    @staticmethod
    def _model_object(name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": 1_700_000_000, "owned_by": "codebot-tests"}
