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

A request with ``"stream": true`` gets the same reply as server-sent events, as OpenAI sends
them: a role chunk, the text in pieces, each tool call as fragments by ``index`` (id and name
first, the arguments in pieces), a chunk with the finish reason, the usage chunk with empty
``choices`` when ``stream_options.include_usage`` is set, then ``data: [DONE]``.

Real servers are stricter or odder than OpenAI; ``ScriptedModel(strict={...})`` turns on
their refusals (``STRICT_MODES``: what llama-cpp-python, vLLM, Ollama and others answer),
``cut_stream(reply, done=...)`` sends a streamed reply cut half-way without a finish reason
(with or without ``[DONE]``), ``ignores_tools(prose)`` plays a server that drops the tools and
answers prose, ``made_up_repos()`` a model whose every call names a repo that does not exist.
``context_tokens=N`` gives a window that either errors like OpenAI/vLLM
(``context_overflow="error"``) or silently drops the oldest messages like Ollama
(``"truncate"``; ``seen`` records what the model was left with), and ``ollama_show``,
``ollama_ps``, ``props``, ``lmstudio_models`` and ``model_fields`` serve the metadata routes
(``POST /api/show``, ``GET /api/ps``, ``GET /props``, ``GET /api/v0/models``, extra fields in
``GET /v1/models``).
``held_before_answering(gates, reply, reading=N)`` answers nothing until each gate is set in turn (a
server still reading the prompt); asked for ``return_progress``, it streams llama.cpp's
``prompt_progress`` chunks of N tokens meanwhile, a step more per gate.
A refused request is recorded but does not consume the script. ``slots=N`` answers N chat
requests at once, the others waiting their turn (recorded on arrival), as a llama.cpp server
started with ``-np N`` does; by default every request is answered at once, in its own thread.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Collection, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

from tests.support.model_replies import (
    DEFAULT_MODEL,
    NO_REPLY_MESSAGE,
    STRICT_MODES,
    Handler,
    Reply,
    answers_after_reading,
    completion,
    cut_stream,
    error,
    hang_up,
    held_before_answering,
    held_mid_stream,
    ignores_tools,
    last_user_text,
    made_up_repos,
    message_texts,
    paced,
    progress_events,
    raw,
    refusal,
    slow,
    stream_events,
    text,
    tokens_of,
    tool_calls,
    trickle,
    under_counted,
    wire_json,
)

__all__ = [
    "NO_REPLY_MESSAGE",
    "STRICT_MODES",
    "Reply",
    "ScriptedModel",
    "answers_after_reading",
    "cut_stream",
    "error",
    "hang_up",
    "held_before_answering",
    "held_mid_stream",
    "ignores_tools",
    "last_user_text",
    "made_up_repos",
    "paced",
    "raw",
    "slow",
    "text",
    "tool_calls",
    "trickle",
    "under_counted",
]

# --------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------


class _Slots:
    """N chat requests answered at once, the others in the order they came (llama.cpp's queue);
    None: every request at once."""

    def __init__(self, slots: int | None) -> None:
        self._limited = slots is not None
        self._free = slots or 0
        self._waiting: deque[object] = deque()
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        if not self._limited:
            yield
            return
        ticket = object()
        with self._changed:
            self._waiting.append(ticket)
            self._changed.wait_for(lambda: self._waiting[0] is ticket and self._free > 0)
            self._waiting.popleft()
            self._free -= 1
            self._changed.notify_all()
        try:
            yield
        finally:
            with self._changed:
                self._free += 1
                self._changed.notify_all()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    model: ScriptedModel

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (a cut attempt, a closed pool) is not a server problem.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _RequestHandler(BaseHTTPRequestHandler):
    # Headers and body go out in separate writes; with Nagle on, each answer waits ~40 ms
    # for a delayed ACK.
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"  # keep-alive, like the real API; the SDK pools connections
    server_version = "ScriptedModel/1.0"
    timeout = 30  # a stuck client cannot pin a handler thread forever
    server: _Server
    _began = 0.0  # perf_counter when this request's line was read

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

    def parse_request(self) -> bool:
        # The model's time (busy_seconds) starts with the request line read: parsing its
        # headers is this server's work, not its client's (bench/agent.py subtracts it).
        self._began = time.perf_counter()
        return super().parse_request()

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

    def _send_error_json(
        self, status: int, message: str, kind: str = "server_error", code: str | None = None
    ) -> None:
        payload = {"error": {"message": message, "type": kind, "param": None, "code": code}}
        self._send(status, json.dumps(payload))

    def _write_slowly(self, data: bytes, interval: float, chunked: bool) -> bool:
        """Write ``data`` one byte every ``interval`` s; False when the client or server went away."""
        for index in range(len(data)):
            if self.server.model._closed.wait(interval):
                return False
            piece = data[index : index + 1]
            try:
                self.wfile.write(b"1\r\n" + piece + b"\r\n" if chunked else piece)
                self.wfile.flush()
            except OSError:
                return False
        return True

    def _send_body(self, status: int, reply: Reply, body: str, content_type: str) -> None:
        if not reply.trickle:
            self._send(status, body, content_type, reply.headers)
            return
        data = body.encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.flush()
        except OSError:
            self.close_connection = True
            return
        if not self._write_slowly(data, reply.trickle, chunked=False):
            self.close_connection = True

    def _send_stream(self, events: list[str], reply: Reply | None, progress: bool = False) -> None:
        """Server-sent events over chunked transfer encoding, as real servers stream; `progress`:
        llama.cpp's prompt progress first, a step more as each of the reply's gates is set."""
        if reply is not None and reply.cut == "close":
            self._send_cut_stream(events)
            return
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("x-request-id", self.server.model._next_id("req_"))
            for name, value in reply.headers if reply else ():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.flush()
            if progress and reply is not None:
                steps = progress_events(json.loads(events[0]), reply.reading, len(reply.gates))
                for step, event in enumerate(steps):
                    if step:
                        reply.gates[step - 1].wait(120)
                    data = f"data: {event}\n\n".encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
            for index, event in enumerate(events):
                data = f"data: {event}\n\n".encode()
                if reply is not None and reply.trickle:
                    if not self._write_slowly(data, reply.trickle, chunked=True):
                        self.close_connection = True
                        return
                    continue
                if reply is not None and reply.pace and index and self.server.model._closed.wait(reply.pace):
                    self.close_connection = True
                    return
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
                if index == 1 and reply is not None and reply.content:  # events[1]: the first text piece
                    self.server.model.first_text_sent.append((time.monotonic(), reply.content))
                if index == 1 and reply is not None and reply.held is not None:
                    reply.held.wait(120)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _send_cut_stream(self, events: list[str]) -> None:
        """Events in a connection-close body (no length, not chunked), then the connection
        closed: what a gateway giving up half-way sends. The client sees a clean end."""
        self.close_connection = True
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Connection", "close")
            self.end_headers()
            for event in events:
                self.wfile.write(f"data: {event}\n\n".encode())
            self.wfile.flush()
        except OSError:
            pass

    # -- routes ------------------------------------------------------------------------

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        model = self.server.model
        model.metadata_requests.append(f"GET {path}")
        if path == "/v1/models":
            models = [model._model_object(name) for name in model.model_ids()]
            self._send(200, json.dumps({"object": "list", "data": models}))
        elif path.startswith("/v1/models/"):
            self._send(200, json.dumps(model._model_object(path.rsplit("/", 1)[1])))
        elif path == "/props" and model.props is not None:
            self._send(200, json.dumps(model.props))
        elif path == "/api/ps" and model.ollama_ps is not None:
            self._send(200, json.dumps(model.ollama_ps))
        elif path == "/api/v0/models" and model.lmstudio_models is not None:
            self._send(200, json.dumps(model.lmstudio_models))
        else:
            self._send_error_json(
                404, f"ScriptedModel: unknown route GET {self.path}", "invalid_request_error"
            )

    def do_POST(self) -> None:
        try:
            self._do_post()
        finally:
            self.server.model._add_busy(time.perf_counter() - self._began)

    def _do_post(self) -> None:
        raw_body = self._read_body()
        path = self.path.split("?", 1)[0].rstrip("/")
        model = self.server.model
        if path == "/api/show":
            model.metadata_requests.append(f"POST {path}")
            if model.ollama_show is not None:
                self._send(200, json.dumps(model.ollama_show))
            else:
                self._send_error_json(404, "ScriptedModel: no /api/show here", "invalid_request_error")
            return
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
        with model._slots.turn():  # a server of N slots answers N requests at once
            self._answer_chat(model, body)

    def _answer_chat(self, model: ScriptedModel, body: dict[str, Any]) -> None:
        refusal = model._refusal(body)
        if refusal is not None:
            if refusal == (200, ""):
                self._send_stream([], None)  # llama-cpp-python: a 200 stream with nothing in it
            else:
                self._send_error_json(refusal[0], refusal[1], "invalid_request_error")
            return
        seen = model._fit_context(body)
        if seen is None:
            assert model.context_tokens is not None
            tokens = model.tokens_of(body)
            self._send_error_json(
                400,
                f"This model's maximum context length is {model.context_tokens} tokens. However, you "
                f"requested {tokens} tokens ({tokens} in the messages, 0 in the completion). Please "
                "reduce the length of the messages or completion.",
                "invalid_request_error",
                code="context_length_exceeded",
            )
            return
        try:
            reply = model._next_reply(seen)
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
        if reply.kind == "hang_up":
            self.close_connection = True
            return
        progress = bool(reply.reading and reply.kind == "completion" and body.get("stream"))
        progress = progress and body.get("return_progress") is True
        if not progress:
            for gate in reply.gates:  # nothing at all until then: a server still reading the prompt
                gate.wait(120)
        if reply.kind == "completion" and body.get("stream"):
            self._send_stream(model._stream_events(body, reply), reply, progress)
        elif reply.kind == "completion":
            whole = wire_json(model._completion(body, reply))
            self._send_body(200, reply, whole[: len(whole) // 2] if reply.cut else whole, "application/json")
        else:
            self._send_body(reply.status, reply, reply.body, reply.content_type)


class ScriptedModel:
    """A real HTTP server on 127.0.0.1 (random free port) in a background thread, speaking
    POST /v1/chat/completions (JSON chat.completion objects, or server-sent events when asked
    to stream) and GET /v1/models, plus the metadata routes it is given.

    ``requests``/``headers`` grow together (same index = same request); header names are
    lower-cased. ``seen`` holds what the model was left with after a silent context cut, one
    per request that got a reply. The handler may run concurrently on several server threads.
    """

    def __init__(
        self,
        default: Reply | Handler | None = None,
        *,
        strict: Collection[str] = (),
        context_tokens: int | None = None,
        context_overflow: Literal["error", "truncate"] = "error",
        ollama_show: dict[str, Any] | None = None,
        ollama_ps: dict[str, Any] | None = None,
        props: dict[str, Any] | None = None,
        model_fields: dict[str, Any] | None = None,
        lmstudio_models: dict[str, Any] | None = None,
        slots: int | None = None,
    ) -> None:
        unknown = set(strict) - set(STRICT_MODES)
        if unknown:
            raise ValueError(f"unknown strict mode(s) {sorted(unknown)}; see STRICT_MODES")
        self.strict = frozenset(strict)
        self.context_tokens = context_tokens
        self.context_overflow = context_overflow
        self.ollama_show = ollama_show
        self.ollama_ps = ollama_ps
        self.props = props
        self.lmstudio_models = lmstudio_models
        self.model_fields = model_fields or {}
        # chat requests answered at once (llama.cpp's -np, llama-cpp-python's 1); None: any number
        self._slots = _Slots(slots)
        self.metadata_requests: list[str] = []  # "GET /api/ps", "POST /api/show", ...
        self.seen: list[dict[str, Any]] = []
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
        self.connections_opened = 0  # TCP connections clients opened (keep-alive reuses one)
        self._closed = threading.Event()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.failures: list[str] = []  # server-side problems: unscripted requests, handler errors...
        # seconds spent inside the server answering chat requests (benchmarks subtract "model time")
        self.busy_seconds = 0.0
        # (monotonic time, the reply's text) when a streamed text reply's first piece was sent
        self.first_text_sent: list[tuple[float, str]] = []

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

    def wait_for_requests(self, n: int, timeout: float = 60) -> None:
        """Block until at least ``n`` chat requests arrived; TimeoutError otherwise (the default
        bound is a hang guard: generous enough for a machine 8x slower than usual)."""
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
                parts.extend(message_texts(message))
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
                self.connections_opened += 1
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
        return completion(body, reply, self._next_id)

    def _model_object(self, name: str) -> dict[str, Any]:
        return {
            "id": name,
            "object": "model",
            "created": 1_700_000_000,
            "owned_by": "codebot-tests",
            **self.model_fields,
        }

    # -- strict servers, context windows, streaming ------------------------------------

    def _fit_context(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """What the model sees: the body, or (truncate) the body without its oldest non-system
        messages until it fits, as Ollama does; None when it errors instead."""
        if self.context_tokens is None or self.tokens_of(body) <= self.context_tokens:
            seen = body
        elif self.context_overflow == "error":
            return None
        else:
            messages = list(body.get("messages") or [])
            while len(messages) > 1 and self.tokens_of({**body, "messages": messages}) > self.context_tokens:
                drop = next((i for i, m in enumerate(messages) if m.get("role") != "system"), None)
                if drop is None:
                    break
                del messages[drop]
            seen = {**body, "messages": messages}
        with self._lock:
            self.seen.append(seen)
        return seen

    def _refusal(self, body: dict[str, Any]) -> tuple[int, str] | None:
        return refusal(self.strict, body)

    tokens_of = staticmethod(tokens_of)

    def _stream_events(self, body: dict[str, Any], reply: Reply) -> list[str]:
        return stream_events(self._completion(body, reply), body, reply)
