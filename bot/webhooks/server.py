"""`codebot webhooks`: `POST /webhooks` (every forge, told apart by its headers) and `GET /health`,
on uvicorn with the same bounds as Slack's HTTP mode (bot/http_bounds.py).

- Size: a declared Content-Length over `webhooks_max_body_bytes` is a 413 before any of the body
  is read; a body without one (chunked) is read up to the cap and no further (413).
- Time and connections: a delivery must arrive whole within `webhooks_request_seconds`; above
  `webhooks_max_connections` the longest-idle connections are closed.
- Work: verifying, matching and queueing (bot/webhooks/receiver.py) run on a few threads, never
  on the event loop, so one slow Redis call holds no other connection.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bot.http_bounds import ConnectionBounds, bounded_server
from bot.webhooks import texts
from bot.webhooks.receiver import Receiver, Verdict
from config.errors import ConfigError
from config.settings import Settings

log = logging.getLogger("codebot.webhooks")

DELIVERY_PATH = "/webhooks"
HEALTH_PATH = "/health"
RECEIVER_THREADS = 4
_DIGITS = re.compile(r"[0-9]{1,15}")
Scope = dict[str, Any]


class WebhooksApp:
    """ASGI: a delivery's headers and bounded body to the receiver, its verdict back as JSON."""

    def __init__(self, receiver: Receiver, max_body_bytes: int) -> None:
        self.receiver = receiver
        self.max_body_bytes = max_body_bytes
        self.pool = ThreadPoolExecutor(RECEIVER_THREADS, thread_name_prefix="webhooks")

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan is off; nothing else is served
            return
        path, method = scope["path"], scope["method"]
        if path == HEALTH_PATH and method == "GET":
            await _answer(send, Verdict(200, "ok"))
        elif path.rstrip("/") != DELIVERY_PATH:
            await _answer(send, Verdict(404, texts.NOT_FOUND), close=True)
        elif method != "POST":
            await _answer(send, Verdict(405, texts.WRONG_METHOD), close=True, allow=True)
        else:
            await self._delivery(scope, receive, send)

    async def _delivery(self, scope: Scope, receive: Any, send: Any) -> None:
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name = raw_name.decode("latin-1").lower()
            headers.setdefault(name, raw_value.decode("latin-1"))  # the first of a repeated header
        declared = headers.get("content-length", "").strip()
        if declared and not _DIGITS.fullmatch(declared):
            await _answer(send, Verdict(400, texts.BAD_LENGTH), close=True)
            return
        if declared and int(declared) > self.max_body_bytes:
            await _answer(send, Verdict(413, texts.TOO_LARGE), close=True)
            return
        body = await self._read_body(receive)
        if body is None:
            await _answer(send, Verdict(413, texts.TOO_LARGE), close=True)
            return
        loop = asyncio.get_running_loop()
        verdict = await loop.run_in_executor(self.pool, self.receiver.receive, headers, body)
        await _answer(send, verdict, close=verdict.status >= 400)

    async def _read_body(self, receive: Any) -> bytes | None:
        """The body, or None past the cap (or when the client went away): never read beyond it."""
        chunks = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunks.extend(message.get("body", b""))
            if len(chunks) > self.max_body_bytes:
                return None
            if not message.get("more_body", False):
                return bytes(chunks)


async def _answer(send: Any, verdict: Verdict, close: bool = False, allow: bool = False) -> None:
    document: dict[str, Any] = {"verdict": verdict.verdict}
    if verdict.repos:
        document["repos"] = list(verdict.repos)
    data = json.dumps(document).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    if allow:
        headers.append((b"allow", b"POST"))
    if close:  # its body may not have been read: the connection cannot be reused
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": verdict.status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


class WebhooksServer:
    """uvicorn on a socket bound at once (port 0: any free port), bounded as Slack's HTTP mode is."""

    def __init__(self, receiver: Receiver, settings: Settings, host: str, port: int) -> None:
        try:
            self.socket = socket.create_server((host, port), backlog=settings.webhooks_max_connections)
        except OSError as exc:
            raise ConfigError(
                f"CODEBOT_WEBHOOKS_PORT: cannot listen on {host}:{port} ({exc.strerror})"
            ) from None
        self.app = WebhooksApp(receiver, settings.webhooks_max_body_bytes)
        bounds = ConnectionBounds(settings.webhooks_request_seconds, settings.webhooks_max_connections)
        self.server = bounded_server(
            self.app, bounds, idle_seconds=settings.webhooks_idle_seconds, proxy_headers=False
        )
        self._stopped = threading.Event()

    @property
    def port(self) -> int:
        return int(self.socket.getsockname()[1])

    def serve_forever(self) -> None:
        """Serve until SIGTERM/SIGINT (uvicorn's handlers: finish what is in flight), or close()."""
        try:
            self.server.run(sockets=[self.socket])
        finally:
            self.app.pool.shutdown(wait=True)
            self._stopped.set()

    def close(self) -> None:
        self.server.should_exit = True
        if self.server.started:
            self._stopped.wait(30)
        self.socket.close()


def build_server(settings: Settings, host: str, port: int) -> WebhooksServer:
    """The receiver wired to the repos file, the secrets and Redis; one line at fault otherwise."""
    from bot.webhooks.receiver import Secrets
    from config.repos import load_whitelist
    from worker.ops.redis_connection import connect

    whitelist = load_whitelist(settings.resolved_repos_file)
    secrets = Secrets(settings, whitelist)  # no secret anywhere: refuse to start
    receiver = Receiver(settings, whitelist, secrets, connect(settings))
    return WebhooksServer(receiver, settings, host, port)


def serve(settings: Settings, host: str, port: int) -> int:
    server = build_server(settings, host, port)
    where = f"http://{host}:{server.port}/"
    log.info("webhooks on %s", where)
    print(texts.listening(where), flush=True)
    server.serve_forever()
    return 0
