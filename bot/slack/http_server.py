"""The Slack adapter's HTTP mode: `POST /slack/events` (events, slash commands) and `GET /health`,
served by uvicorn with every resource bounded.

Why not bolt's `app.start()`: it is Python's `http.server`, which its docs (and bolt's) say is
not for production; one thread per connection meant 2,990 threads for 3,000 idle connections.
Why not bolt's ASGI adapter as it is: it runs `app.dispatch` on the event loop (bolt's first
request calls `auth.test`, stalling every connection meanwhile) and reads bodies of any size.
So this is a small ASGI app in the same shape, on uvicorn:

- Connections: one event loop holds them, not a thread each (~5 KB apiece). Above
  `slack_http_max_connections`, the longest-idle connections (no request in progress) are
  closed to make room: idle clients cannot crowd Slack out, and a request in flight is never
  cut. (uvicorn's own `limit_concurrency` would answer 503 to every new request instead.)
- Time: a request must arrive whole (headers and body) within `slack_http_request_seconds`
  of its connection opening or of the previous response, else the connection is closed
  (uvicorn's own keep-alive timer only covers the idle time between requests and restarts on
  every byte, so a client sending a byte a second, or nothing at all, would hold a connection
  forever). Idle keep-alive connections close after `slack_http_idle_seconds`.
- Size: a body over 1 MB is refused (413) before it is read; no Content-Length is a 411.
- Signature: checked on the raw bytes before anything parses them; any request without a
  valid one is a 401, whatever its body, and logs no traceback.
- Ack: an Events API delivery (`event_callback`), once its signature checks out, is answered
  200 at once, here on the event loop, before bolt sees it. Bolt would ack it first thing
  anyway (events are auto-acknowledged, the listener runs after), but only after its
  middleware (the signature again, `auth.test` on the first request) and only once a dispatch
  thread got the GIL from the listeners running the intake of earlier deliveries: 50x a bare
  app's p99 under a burst (bench/RESULTS.md, "Slack ack"). In `codebot slack` the delivery then
  goes to the intake process (bot/slack/intake_process.py: another process, so its intake holds
  no GIL an ack needs); without one (the tests' in-process server), to bolt on the dispatch
  threads here, at most `slack_http_max_connections` of them waiting. A full queue: dispatched
  here and answered after, as every other request is (slash commands, interactivity and
  `url_verification` answer in their response body).
- Work: bolt's dispatch (signature check again, then its listeners on their own executor)
  runs on at most `slack_http_dispatch_threads` threads, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any

from slack_bolt import App, BoltRequest, BoltResponse

from bot.http_bounds import ConnectionBounds, bounded_server
from config.settings import Settings

log = logging.getLogger("codebot.slack")

EVENTS_PATH = "/slack/events"
HEALTH_PATH = "/health"
MAX_BODY_BYTES = 1_000_000  # Slack payloads are a few KB; anything bigger is not from Slack
_DIGITS = re.compile(r"[0-9]{1,12}")  # a Content-Length, an X-Slack-Request-Timestamp
SIGNATURE_MAX_AGE_SECONDS = 300  # Slack's own bound (and bolt's): an older request may be a replay
Scope = dict[str, Any]
# an acknowledged delivery (body, headers) to the intake process; False: its queue is full
Handoff = Callable[[str, dict[str, list[str]]], bool]


class SlackEventsApp:
    """ASGI: `POST /slack/events` -> bolt's `App.dispatch` on a bounded thread pool."""

    def __init__(
        self,
        app: App,
        dispatch_threads: int,
        signing_secret: str = "",
        max_waiting: int = 1000,
        handoff: Handoff | None = None,
    ) -> None:
        self.app = app
        self.handoff = handoff  # to the intake process (bot/slack/intake_process.py), if any
        self.dispatch_threads = dispatch_threads
        # Threads started once (start_all_threads) and kept: anyio's worker threads end after 10 s
        # idle, and each new one is started on the event loop, between two acks.
        self.pool = ThreadPoolExecutor(dispatch_threads, thread_name_prefix="slack-dispatch")
        self.signing_secret = signing_secret  # "" (Socket Mode): nothing to verify here
        self.max_waiting = max_waiting
        self.waiting = 0  # acked deliveries whose dispatch has not returned yet

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan is off; nothing else is served
            return
        if scope["method"] == "GET" and scope["path"] == HEALTH_PATH:
            await _send(send, BoltResponse(status=200, body="ok"))
        elif scope["method"] != "POST" or scope["path"] != EVENTS_PATH:
            await _refuse(send, 404)
        else:
            await self._event(scope, receive, send)

    async def _event(self, scope: Scope, receive: Any, send: Any) -> None:
        headers: dict[str, list[str]] = {}
        for raw_name, raw_value in scope["headers"]:
            headers.setdefault(raw_name.decode("latin-1").lower(), []).append(raw_value.decode("latin-1"))
        declared = (headers.get("content-length") or [""])[0].strip()
        if not _DIGITS.fullmatch(declared):
            await _refuse(send, 411 if not declared else 400)  # no framing we can trust: never read on
            return
        if int(declared) > MAX_BODY_BYTES:
            await _refuse(send, 413)
            return
        raw = await _read_body(receive)
        if raw is None:
            return  # the client went away (or was too slow: bot/http_bounds.py)
        # The signature is checked here, on the bytes as they came, before anything reads them:
        # bolt checks it only after parsing the body (a JSON body that is not an object ended in
        # a 500 and a traceback, for any sender), and it reads the timestamp with int().
        stamp = (headers.get("x-slack-request-timestamp") or [""])[0]
        signature = (headers.get("x-slack-signature") or [""])[0]
        if not _DIGITS.fullmatch(stamp) or not self._signed(raw, stamp, signature):
            await _refuse(send, 401)
            return
        body = raw.decode("utf-8", errors="replace")
        if self.signing_secret and body.encode("utf-8") != raw:
            # Signed by Slack but not UTF-8: the asker still gets a reply, read with U+FFFD in
            # place of the bad bytes. Bolt verifies again on the text it is given, so the text
            # is signed anew with the secret these very bytes were just verified with.
            headers["x-slack-signature"] = [_signature(self.signing_secret, stamp, body.encode("utf-8"))]
        try:
            request = BoltRequest(
                body=body,
                query=scope.get("query_string", b"").decode("latin-1"),
                headers={name: values for name, values in headers.items()},
            )
        except Exception as exc:  # signed, yet not a payload bolt can read (JSON not an object…)
            log.warning("slack http: a signed request bolt cannot read refused: %s", type(exc).__name__)
            await _refuse(send, 400)
            return
        if request.body.get("type") == "event_callback":
            if self.handoff is not None and self.handoff(body, headers):
                await _send(send, BoltResponse(status=200, body=""))
                return
            if self.handoff is None and self.waiting < self.max_waiting:
                await self._ack_then_dispatch(request, send)
                return
        await _send(send, await self._dispatch(request))

    async def _dispatch(self, request: BoltRequest) -> BoltResponse:
        return await asyncio.get_running_loop().run_in_executor(self.pool, self.app.dispatch, request)

    async def _ack_then_dispatch(self, request: BoltRequest, send: Any) -> None:
        """200 now, bolt after: the request stays in flight until its dispatch returned, so a
        graceful shutdown still waits for it (uvicorn waits for its tasks)."""
        self.waiting += 1
        try:
            await _send(send, BoltResponse(status=200, body=""))
            response = await self._dispatch(request)
        finally:
            self.waiting -= 1
        if response.status != 200:  # bolt refused it after all (auth.test failed…): Slack won't retry
            event = request.body.get("event")
            kind = event.get("type") if isinstance(event, dict) else None
            log.warning(
                "slack: an acknowledged %s event was dropped: bolt answered %s", kind, response.status
            )

    def _signed(self, raw: bytes, stamp: str, signature: str) -> bool:
        """Slack's v0 signature over the raw bytes, made within the last five minutes."""
        if not self.signing_secret:
            return True
        if abs(time.time() - int(stamp)) > SIGNATURE_MAX_AGE_SECONDS:
            return False
        return hmac.compare_digest(_signature(self.signing_secret, stamp, raw), signature)


def start_all_threads(pool: ThreadPoolExecutor, count: int) -> None:
    """Start the pool's `count` threads now: a pool starts one per task as work first arrives,
    and `Thread.start()` waits until the new thread runs, i.e. gets the GIL, which a burst's
    acks need too."""
    ready = threading.Barrier(count + 1)
    for _ in range(count):  # each blocks a thread until all are up, so each task gets a new one
        pool.submit(ready.wait, 10)
    with contextlib.suppress(threading.BrokenBarrierError):
        ready.wait(10)


def _signature(secret: str, stamp: str, raw: bytes) -> str:
    digest = hmac.new(secret.encode("utf-8"), b"v0:" + stamp.encode("ascii") + b":" + raw, hashlib.sha256)
    return "v0=" + digest.hexdigest()


async def _read_body(receive: Any) -> bytes | None:
    chunks = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.extend(message.get("body", b""))
        if len(chunks) > MAX_BODY_BYTES:
            return None
        if not message.get("more_body", False):
            return bytes(chunks)


async def _refuse(send: Any, status: int) -> None:
    await _send(
        send, BoltResponse(status=status, body={"error": HTTPStatus(status).phrase.lower()}), close=True
    )


async def _send(send: Any, response: BoltResponse, close: bool = False) -> None:
    body = response.body if isinstance(response.body, str) else json.dumps(response.body)
    data = body.encode("utf-8")
    headers: list[tuple[bytes, bytes]] = []
    for name, values in response.headers.items():
        if name.lower() not in ("content-length", "connection"):
            for value in _values(values):
                headers.append((name.encode("latin-1"), str(value).encode("latin-1")))
    headers.append((b"content-length", str(len(data)).encode()))
    if close:  # its body may not have been read: the connection cannot be reused
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def _values(values: Sequence[str] | str) -> Sequence[str]:
    return [values] if isinstance(values, str) else values


class SlackHTTPServer:
    """The adapter's HTTP server: uvicorn on a socket bound at once (port 0: any free port)."""

    def __init__(
        self,
        app: App,
        settings: Settings,
        host: str = "127.0.0.1",
        port: int = 3000,
        handoff: Handoff | None = None,
    ) -> None:
        self.socket = socket.create_server((host, port), backlog=settings.slack_http_max_connections)
        self.events = SlackEventsApp(
            app,
            settings.slack_http_dispatch_threads,
            settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else "",
            max_waiting=settings.slack_http_max_connections,  # as many as it may hold connections
            handoff=handoff,
        )
        start_all_threads(self.events.pool, settings.slack_http_dispatch_threads)
        # the time and connection bounds (bot/http_bounds.py), on uvicorn's public hooks
        bounds = ConnectionBounds(settings.slack_http_request_seconds, settings.slack_http_max_connections)
        self.server = bounded_server(self.events, bounds, idle_seconds=settings.slack_http_idle_seconds)
        self._stopped = threading.Event()

    @property
    def port(self) -> int:
        return int(self.socket.getsockname()[1])

    def serve_forever(self) -> None:
        """Serve until SIGTERM/SIGINT (uvicorn's own handlers: stop accepting, finish what is in
        flight, then return), or until close() from another thread."""
        try:
            self.server.run(sockets=[self.socket])
        finally:
            self.events.pool.shutdown(wait=True)  # the dispatches uvicorn stopped waiting for
            self._stopped.set()

    def close(self) -> None:
        self.server.should_exit = True
        if self.server.started:
            self._stopped.wait(30)
        self.events.pool.shutdown(wait=False)
        self.socket.close()
