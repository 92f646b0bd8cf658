"""The HTTP servers' connection bounds (Slack HTTP mode, forge webhooks), on uvicorn's public hooks only.

uvicorn has no per-request deadline (its keep-alive timer restarts on every byte) and its
`limit_concurrency` answers 503 to everyone once full. Two public hooks give both bounds without
touching uvicorn's internals:

- `uvicorn.Config(http=...)` takes any asyncio protocol class: `BoundedConnection` wraps the one
  uvicorn would use for `--http h11` (composition: every asyncio callback is passed on) and sees
  each connection open and close;
- an ASGI middleware (`RequestBoundsMiddleware`) sees each request start, its body arrive whole,
  and its response end, keyed by the client's address, which names the connection.

The bounds: a request must arrive whole (headers and body) within `request_seconds` of its
connection opening or of the previous response, else the connection is closed (a slowloris
sending a byte a second, or nothing, is dropped); above `max_connections`, the longest-idle
connections (no request in progress) are closed to make room, and a request in flight never is.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string

log = logging.getLogger("codebot.http")

Peer = tuple[str, int]
BUSY = float("inf")  # idle_since of a connection with a request in progress


@dataclass
class _Tracked:
    transport: asyncio.BaseTransport
    idle_since: float
    deadline: asyncio.TimerHandle | None = None


class ConnectionBounds:
    """The live connections of one server, by client address, with their deadlines."""

    def __init__(self, request_seconds: float, max_connections: int) -> None:
        self.request_seconds = request_seconds
        self.max_connections = max_connections
        self.live: dict[Peer, _Tracked] = {}

    def opened(self, peer: Peer, transport: asyncio.BaseTransport) -> None:
        loop = asyncio.get_running_loop()
        self.live[peer] = _Tracked(transport, loop.time())
        self._arm(peer)
        if len(self.live) > self.max_connections:
            self._make_room(peer)

    def closed(self, peer: Peer) -> None:
        tracked = self.live.pop(peer, None)
        if tracked is not None and tracked.deadline is not None:
            tracked.deadline.cancel()

    def request_started(self, peer: Peer) -> None:
        if peer in self.live:
            self.live[peer].idle_since = BUSY  # never closed to make room

    def request_whole(self, peer: Peer) -> None:
        """The whole request is in: the answer may take as long as it takes."""
        tracked = self.live.get(peer)
        if tracked is not None and tracked.deadline is not None:
            tracked.deadline.cancel()
            tracked.deadline = None

    def response_done(self, peer: Peer) -> None:
        """The next request on this keep-alive connection gets its own deadline."""
        tracked = self.live.get(peer)
        if tracked is not None and not tracked.transport.is_closing():
            tracked.idle_since = asyncio.get_running_loop().time()
            self._arm(peer)

    def _arm(self, peer: Peer) -> None:
        self.request_whole(peer)
        loop = asyncio.get_running_loop()
        self.live[peer].deadline = loop.call_later(self.request_seconds, self._too_slow, peer)

    def _too_slow(self, peer: Peer) -> None:
        tracked = self.live.get(peer)
        if tracked is not None and not tracked.transport.is_closing():
            log.debug("http: closing a connection that did not send a whole request in time")
            tracked.transport.close()

    def _make_room(self, newcomer: Peer) -> None:
        live = {peer: t for peer, t in self.live.items() if not t.transport.is_closing()}
        excess = len(live) - self.max_connections
        idle = sorted(
            (t.idle_since, peer) for peer, t in live.items() if peer != newcomer and t.idle_since != BUSY
        )
        if excess > 0:
            log.debug("http: at %d connections, closing the %d longest idle", self.max_connections, excess)
        for _, peer in idle[: max(0, excess)]:  # requests in flight are never cut
            live[peer].transport.close()


def _peer(address: Any) -> Peer | None:
    if isinstance(address, list | tuple) and len(address) >= 2:
        return (str(address[0]), int(address[1]))
    return None


class BoundedConnection(asyncio.Protocol):
    """uvicorn's h11 protocol for one connection, wrapped: opening and closing are told to the
    bounds; everything else is uvicorn's."""

    bounds: ConnectionBounds  # set per server by bounded_protocol()

    def __init__(self, **uvicorn_arguments: Any) -> None:
        inner_class = import_from_string(HTTP_PROTOCOLS["h11"])  # what `--http h11` runs
        self.inner: asyncio.Protocol = inner_class(**uvicorn_arguments)
        self.peer: Peer | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inner.connection_made(transport)
        self.peer = _peer(transport.get_extra_info("peername"))
        if self.peer is not None:
            self.bounds.opened(self.peer, transport)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None:
            self.bounds.closed(self.peer)
        self.inner.connection_lost(exc)


def bounded_protocol(bounds: ConnectionBounds) -> type[asyncio.Protocol]:
    """The protocol class for `uvicorn.Config(http=...)`, bound to one server's bounds."""
    return type("BoundedConnection", (BoundedConnection,), {"bounds": bounds})


class RequestBoundsMiddleware:
    """ASGI: tells the bounds when a request starts, arrives whole, and is answered."""

    def __init__(self, app: Any, bounds: ConnectionBounds) -> None:
        self.app = app
        self.bounds = bounds

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        peer = _peer(scope.get("client")) if scope["type"] == "http" else None
        if peer is None:
            await self.app(scope, receive, send)
            return
        self.bounds.request_started(peer)

        async def receiving() -> dict[str, Any]:
            message: dict[str, Any] = await receive()
            if message["type"] == "http.request" and not message.get("more_body", False):
                self.bounds.request_whole(peer)
            return message

        async def sending(message: dict[str, Any]) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self.bounds.response_done(peer)

        await self.app(scope, receiving, sending)


def bounded_server(
    app: Any, bounds: ConnectionBounds, *, idle_seconds: float, proxy_headers: bool = True
) -> uvicorn.Server:
    """uvicorn serving `app` within `bounds`: the one configuration both servers share (no
    lifespan, no access log, no Server header; the backlog as large as the connections allowed)."""
    config = uvicorn.Config(
        RequestBoundsMiddleware(app, bounds),
        http=bounded_protocol(bounds),
        lifespan="off",
        timeout_keep_alive=max(1, round(idle_seconds)),
        timeout_graceful_shutdown=max(1, round(bounds.request_seconds)),
        backlog=bounds.max_connections,
        access_log=False,
        log_level="warning",
        server_header=False,
        proxy_headers=proxy_headers,
    )
    return uvicorn.Server(config)
