"""A local stand-in for Slack's Socket Mode WebSocket server, speaking the real protocol.

The fake Web API answers `apps.connections.open` with this server's URL (`SlackAPI.socket_url`),
so the real slack_sdk client connects here as it would to wss://wss-primary.slack.com/link::

    with SlackSocket() as socket:
        api.socket_url = socket.url
        ...                                            # start the adapter
        socket.wait_connected()                        # it has received {"type": "hello"}
        envelope = socket.push_event(event_callback)   # {"type": "events_api", "envelope_id", ...}
        ack = socket.wait_ack(envelope)                # {"envelope_id"} it sent back, and when
        assert ack.at - socket.sent[envelope] < 3.0

What Slack does, and this server does too:
- on connect, `{"type": "hello", "num_connections", "debug_info", "connection_info"}`;
- envelopes `{"envelope_id", "type": "events_api" | "slash_commands", "payload",
  "accepts_response_payload", "retry_attempt", "retry_reason"}` (the last two for events only),
  each to one open connection (here: the newest);
- the client must ack with `{"envelope_id"}`, plus `"payload"` when it answers a command;
- WebSocket pings are answered with pongs (the client pings every ~10 s and reconnects
  when pongs stop); `{"type": "disconnect", "reason"}` asks the client to reconnect.
Every text message the client sends is recorded with its arrival time (`time.monotonic()`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

PATH = "/link"
WAIT_SECONDS = 10.0


@dataclass
class Ack:
    envelope_id: str
    payload: dict[str, Any] | None
    at: float = field(default_factory=time.monotonic)


class SlackSocket:
    """The WebSocket server on 127.0.0.1, on an event loop in a thread of its own."""

    def __init__(self) -> None:
        self.acks: list[Ack] = []
        self.other_messages: list[dict[str, Any]] = []  # text frames that are not acks
        self.envelopes: dict[str, dict[str, Any]] = {}  # envelope id -> the envelope sent
        self.sent: dict[str, float] = {}  # envelope id -> when it was sent
        self.connections = 0  # ever accepted (each got its hello)
        self._open: list[web.WebSocketResponse] = []
        self._changed = threading.Condition()
        self._ids = itertools.count(1)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="slack-socket", daemon=True)
        self._thread.start()
        self._runner = self._call(self._start())

    async def _start(self) -> web.AppRunner:
        app = web.Application()
        app.router.add_get(PATH, self._link)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return runner

    @property
    def url(self) -> str:
        """What `apps.connections.open` answers."""
        return f"ws://127.0.0.1:{self._runner.addresses[0][1]}{PATH}"

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(WAIT_SECONDS)

    async def _link(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(compress=False)
        await ws.prepare(request)
        number = self.connections + 1
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": number,
                "debug_info": {"host": "fake-slack", "build_number": 1, "approximate_connection_time": 3600},
                "connection_info": {"app_id": "A0001"},
            }
        )
        with self._changed:
            self.connections = number
            self._open.append(ws)
            self._changed.notify_all()
        try:
            async for frame in ws:  # pings are answered by aiohttp (autoping)
                if frame.type == WSMsgType.TEXT:
                    self._received(json.loads(frame.data))
        finally:
            with self._changed:
                self._open.remove(ws)
                self._changed.notify_all()
        return ws

    def _received(self, message: dict[str, Any]) -> None:
        with self._changed:
            if "envelope_id" in message:
                self.acks.append(Ack(message["envelope_id"], message.get("payload")))
            else:
                self.other_messages.append(message)
            self._changed.notify_all()

    # --- what tests do ------------------------------------------------------------------------------

    def wait_connected(self, count: int = 1, timeout: float = 110.0) -> None:
        """Until `count` connections have been accepted and one is open."""
        with self._changed:
            if not self._changed.wait_for(lambda: self.connections >= count and self._open, timeout):
                raise AssertionError(f"no Socket Mode connection #{count} after {timeout} s")

    def push(self, kind: str, payload: dict[str, Any], **fields: Any) -> str:
        """Send one envelope to the newest open connection; returns its envelope id."""
        envelope_id = f"env-{next(self._ids):04d}"
        envelope = {"envelope_id": envelope_id, "type": kind, "payload": payload, **fields}
        with self._changed:
            if not self._open:
                raise AssertionError("no open Socket Mode connection")
            ws = self._open[-1]
            self.envelopes[envelope_id] = envelope
            self.sent[envelope_id] = time.monotonic()
        self._call(ws.send_json(envelope))
        return envelope_id

    def push_event(self, body: dict[str, Any], retry_attempt: int = 0, retry_reason: str = "") -> str:
        """An Events API delivery: `body` is the event_callback (as `event_body` makes it)."""
        return self.push(
            "events_api",
            body,
            accepts_response_payload=False,
            retry_attempt=retry_attempt,
            retry_reason=retry_reason,
        )

    def push_command(self, fields: dict[str, str]) -> str:
        """A slash command: the same fields as the HTTP form, as a JSON object."""
        return self.push("slash_commands", fields, accepts_response_payload=True)

    def wait_ack(self, envelope_id: str, timeout: float = 5.0) -> Ack:
        with self._changed:
            found = self._changed.wait_for(
                lambda: [a for a in self.acks if a.envelope_id == envelope_id], timeout
            )
        if not found:
            raise AssertionError(f"envelope {envelope_id} not acked after {timeout} s")
        return found[0]

    def acks_for(self, envelope_id: str) -> list[Ack]:
        with self._changed:
            return [a for a in self.acks if a.envelope_id == envelope_id]

    def disconnect(self, reason: str = "refresh_requested") -> None:
        """Slack's notice that this connection is about to go: the client should reconnect."""
        self.push_raw({"type": "disconnect", "reason": reason, "debug_info": {"host": "fake-slack"}})

    def push_raw(self, message: dict[str, Any]) -> None:
        with self._changed:
            ws = self._open[-1]
        self._call(ws.send_json(message))

    def wait_open(self, count: int, timeout: float = 10.0) -> None:
        """Until exactly `count` connections are open (a client's close is seen asynchronously)."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self._open) == count, timeout):
                raise AssertionError(f"{len(self._open)} open Socket Mode connections, expected {count}")

    def close(self) -> None:
        """Close every open connection (close frame 1000), then the server and its loop."""

        async def stop() -> None:
            for ws in list(self._open):
                await ws.close()
            await self._runner.cleanup()

        try:
            self._call(stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(WAIT_SECONDS)
            self._loop.close()

    def __enter__(self) -> SlackSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
