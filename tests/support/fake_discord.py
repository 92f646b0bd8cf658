"""A local Discord for tests: the REST routes codebot uses and a real-protocol gateway.

The real discord.py client (adapter) and the worker's REST sink talk to it over loopback:

    fake = FakeDiscord().start()
    settings = load_settings(..., discord_api_url=fake.base_url)
    fake.message_create(f"<@{fake.bot_id}> how does retry work?", mentions=[fake.bot_user])

REST: every call is recorded (`calls`, `find`) and answered with `Content-Type:
application/json` exactly (discord.py parses nothing else, docs/platform-notes.md, pitfall 17);
`rate_limit(K, s)` answers the next K matching calls with 429 and `retry_after` s (with a
`Via` header, or discord.py takes the 429 for a Cloudflare ban); `outage(503)` fails every
matching call with that status until `outage(None)` (discord.py itself retries 500, 502, 504
and 524 five times, 16 s in all, and raises at once on the other 5xx; `outage(429,
retry_after=s)` rate-limits every call); `hold(method, path, until)` holds the next matching
call until the event is set (or `seconds`), then answers it as usual. Messages honour `nonce` +
`enforce_nonce` like Discord: the same nonce in a channel returns the earlier message. A
thread started from a message gets the message's id; a second one fails with code 160004. A
reply (`p.reply_fields`) is shown with its `referenced_message`, resolved when it is read.

Components and interactions: messages keep their `components` (buttons in action rows) and
every content they showed (`states(id)`: what a reader saw after each post and edit, in order);
`click(message, emoji)` sends the INTERACTION_CREATE of a click on one of the bot's buttons (type
3, MESSAGE_COMPONENT), `submit_modal(custom_id, values)` the one of a submitted modal (type 5);
interaction callbacks of type 4 (a message, ephemeral with flags 64) post one, type 9 (MODAL)
are kept in `modals` (a title or text-input label over 45 characters, a custom_id over 100:
400 Invalid Form Body, as Discord answers); `POST /channels/{id}/typing` is recorded.

Gateway: HELLO (op 10); IDENTIFY (op 2) → READY (bot user, application, one unavailable
guild) and GUILD_CREATE (a text channel); heartbeats (op 1) → ACK (op 11). Tests inject
dispatches (MESSAGE_CREATE, INTERACTION_CREATE, …), sent with increasing sequence numbers.

Attachments: `attachment(name, data)` is an attachment object whose signed `url` this server
serves under /attachments/ (no token needed, as Discord's CDN); `files.fail(url, 404)`,
`files.hang(url)`, `files.requests` (tests/support/file_host.py).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from aiohttp import WSMsgType, web

from tests.support import discord_payloads as p
from tests.support.file_host import FileStore

API_PREFIX = "/api/v10"
HELLO, IDENTIFY, HEARTBEAT, RESUME, HEARTBEAT_ACK, DISPATCH = 10, 2, 1, 6, 11, 0
THREAD_EXISTS = 160004
EPHEMERAL = 64
Result = tuple[int, Any]


@dataclass
class Call:
    method: str
    path: str  # without the /api/v10 prefix, e.g. /channels/1/messages
    query: dict[str, str]
    body: Any
    status: int = 200
    at: float = field(default_factory=time.monotonic)


@dataclass
class _RateLimit:
    remaining: int
    retry_after: float
    method: str | None
    path: str | None  # a regex searched in the path


class FakeDiscord:
    def __init__(self) -> None:
        self.bot_user = p.user("codebot", bot=True)
        self.human, self.admin = p.user("alice"), p.user("root")
        self.guild_id, self.channel_id = p.snowflake(), p.snowflake()
        self.calls: list[Call] = []
        self.messages: dict[str, dict[str, Any]] = {}
        self.channels = {self.channel_id: p.text_channel(self.channel_id, self.guild_id, "general")}
        self.reactions: list[tuple[str, str, str, str]] = []  # (method, channel, message, emoji)
        self.interaction_messages: dict[str, str] = {}  # interaction token -> @original message id
        self.modals: list[dict[str, Any]] = []  # modals sent in answer to interactions (callback type 9)
        self.history: dict[str, list[str]] = {}  # message id -> every content it showed, in order
        self.commands: list[dict[str, Any]] = []
        self.command_route = ""  # where the commands were last synced
        self.announce_threads = True  # False: no THREAD_CREATE, as if the adapter was restarted since
        self.forbid_threads = False  # True: the bot lacks Create Public Threads (403, code 50013)
        self._interaction_channels: dict[str, str] = {}
        self._nonces: dict[tuple[str, str], str] = {}
        self._limits: list[_RateLimit] = []
        self._refusals: list[_RateLimit] = []  # calls answered with an error (refuse())
        self._refusal_status = 403
        self._outage: _RateLimit | None = None  # every matching call fails with `status` while set
        self._outage_status = 500
        self._holds: list[tuple[_RateLimit, threading.Event, float]] = []  # hold(): match, until, seconds
        self.held: list[Call] = []  # calls hold() held, as they arrived
        self.released: list[Call] = []  # held calls whose hold is over (then answered as usual)
        self._sockets: list[web.WebSocketResponse] = []
        self._sequence = 0
        self._pending: set[asyncio.Future[None]] = set()
        self._lock = threading.Lock()
        self.files = FileStore()  # attachments, served like Discord's CDN
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fake-discord", daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def bot_id(self) -> str:
        return str(self.bot_user["id"])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{API_PREFIX}"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    # --- lifecycle -----------------------------------------------------------------------------
    def start(self) -> FakeDiscord:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self.loop).result(10)
        return self

    def close(self) -> None:
        self.files.close()

        async def stop() -> None:
            for ws in list(self._sockets):
                await ws.close()
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/attachments/{tail:.*}", self._attachment)
        app.router.add_route("*", API_PREFIX + "/{tail:.*}", self._rest)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    # --- test controls -------------------------------------------------------------------------
    def rate_limit(
        self, calls: int, retry_after: float, method: str | None = None, path: str | None = None
    ) -> None:
        """Answer the next `calls` matching REST calls with 429 and this retry_after."""
        with self._lock:
            self._limits.append(_RateLimit(calls, retry_after, method, path))

    def refuse(
        self, calls: int, method: str | None = None, path: str | None = None, status: int = 403
    ) -> None:
        """Answer the next `calls` matching REST calls with Discord's error (50013 Missing
        Permissions by default), as when the bot lost access to the channel."""
        with self._lock:
            self._refusals = [_RateLimit(calls, 0.0, method, path)]  # refuse(0) stops refusing
            self._refusal_status = status

    def outage(
        self, status: int | None, method: str | None = None, path: str | None = None, retry_after: float = 1.0
    ) -> None:
        """From now on every matching REST call fails with `status` until `outage(None)`: a 5xx
        (Discord's API down), or 429 with `retry_after` (rate limited on every bucket)."""
        with self._lock:
            self._outage = None if status is None else _RateLimit(1, retry_after, method, path)
            self._outage_status = status or 500

    def hold(self, method: str, path: str, until: threading.Event, seconds: float = 10.0) -> None:
        """Hold the next `method` call whose path matches the regex until `until` is set (at most
        `seconds`), then answer it as usual: a Discord slow to answer that one call."""
        with self._lock:
            self._holds.append((_RateLimit(1, 0.0, method, path), until, seconds))

    def _hold_for(self, method: str, path: str) -> tuple[threading.Event, float] | None:
        with self._lock:
            for index, (match, until, seconds) in enumerate(self._holds):
                if match.method == method and re.search(match.path or "", path):
                    del self._holds[index]
                    return until, seconds
        return None

    @property
    def gateway_sessions(self) -> int:
        """Gateway connections open now (an adapter that identified counts one)."""
        return sum(1 for ws in self._sockets if not ws.closed)

    def find(self, method: str, path: str) -> list[Call]:
        """Recorded calls with this method whose path matches the regex, in order."""
        with self._lock:
            return [c for c in self.calls if c.method == method and re.search(path, c.path)]

    def posted(self, channel: str) -> list[dict[str, Any]]:
        """The bot's messages in a channel, in order, as they are now (after edits)."""
        with self._lock:
            return [
                m
                for m in self.messages.values()
                if m["channel_id"] == channel and m["author"]["id"] == self.bot_id
            ]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 60.0) -> Any:  # a hang guard
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.02)
        raise AssertionError(
            f"timed out after {timeout} s; calls: {[(c.method, c.path) for c in self.calls]}"
        )

    def dispatch(self, event: str, data: dict[str, Any]) -> None:
        asyncio.run_coroutine_threadsafe(self._dispatch(event, data), self.loop).result(5)

    def message_create(
        self,
        content: str,
        *,
        author: dict[str, Any] | None = None,
        channel: str | None = None,
        mentions: list[dict[str, Any]] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """Inject a user's message (MESSAGE_CREATE); returns its payload."""
        channel = channel or self.channel_id
        message = p.message(channel, author or self.human, content, mentions=mentions or [], **extra)
        guild = self.channels.get(channel, {}).get("guild_id")
        if guild:
            message.update(guild_id=guild, member=p.member())
        with self._lock:
            self.messages[message["id"]] = message
            shown = self._with_referenced(message)
        self.dispatch("MESSAGE_CREATE", shown)
        return message

    def open_dm(self) -> str:
        channel_id = p.snowflake()
        with self._lock:
            self.channels[channel_id] = p.dm_channel(channel_id, self.human)
        return channel_id

    def states(self, message_id: str) -> list[str]:
        with self._lock:
            return list(self.history.get(message_id, []))

    def click(
        self, message: dict[str, Any], emoji: str, user: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """A user clicks the button showing `emoji` on one of the bot's messages."""
        buttons = [c for row in message.get("components") or [] for c in row.get("components", [])]
        (button,) = [b for b in buttons if (b.get("emoji") or {}).get("name") == emoji]
        channel = self.channels[message["channel_id"]]
        data = p.component_interaction(
            self.bot_id, message, button["custom_id"], user or self.human, channel, channel.get("guild_id")
        )
        return self._interact(data, channel["id"])

    def submit_modal(
        self,
        custom_id: str,
        values: dict[str, str],
        user: dict[str, Any] | None = None,
        channel: str | None = None,
    ) -> dict[str, Any]:
        """A user submits a modal the bot sent, with these text inputs filled."""
        channel_data = self.channels[channel or self.channel_id]
        data = p.modal_submit_interaction(
            self.bot_id, custom_id, values, user or self.human, channel_data, channel_data.get("guild_id")
        )
        return self._interact(data, channel_data["id"])

    def interaction(
        self,
        sub: str,
        options: dict[str, str] | None = None,
        user: dict[str, Any] | None = None,
        channel: str | None = None,
    ) -> dict[str, Any]:
        """Inject `/codebot <sub> option:value…` (INTERACTION_CREATE); returns its payload."""
        channel_data = self.channels[channel or self.channel_id]
        command_id = next((c["id"] for c in self.commands if c["name"] == "codebot"), p.snowflake())
        data = p.command_interaction(
            self.bot_id,
            command_id,
            sub,
            options or {},
            user or self.human,
            channel_data,
            channel_data.get("guild_id"),
        )
        return self._interact(data, channel_data["id"])

    def _interact(self, data: dict[str, Any], channel: str) -> dict[str, Any]:
        """Send an INTERACTION_CREATE; its callbacks and follow-ups land in `channel`."""
        with self._lock:
            self._interaction_channels[data["token"]] = channel
        self.dispatch("INTERACTION_CREATE", data)
        return data

    def attachment(self, name: str, data: bytes, content_type: str = "text/plain") -> dict[str, Any]:
        """A file someone attached, as a message's `attachments` item, served here."""
        attachment_id = p.snowflake()
        url = self.files.put(
            f"http://127.0.0.1:{self.port}", f"/attachments/{self.channel_id}/{attachment_id}/{name}", data
        )
        signed = f"{url}?ex=6a000000&is=69f00000&hm={attachment_id[-8:]}"
        return {
            "id": attachment_id,
            "filename": name,
            "content_type": content_type,
            "size": len(data),
            "url": signed,
            "proxy_url": signed,
        }

    async def _attachment(self, request: web.Request) -> web.Response:
        answer = self.files.answer
        status, headers, body = await asyncio.get_running_loop().run_in_executor(
            None, answer, str(request.rel_url), dict(request.headers.items())
        )
        return web.Response(status=status, headers=headers, body=body)

    # --- gateway -------------------------------------------------------------------------------
    async def _dispatch(self, event: str, data: dict[str, Any]) -> None:
        self._sequence += 1
        frame = json.dumps({"op": DISPATCH, "t": event, "s": self._sequence, "d": data})
        for ws in list(self._sockets):
            if not ws.closed:
                await ws.send_str(frame)

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.append(ws)
        await ws.send_str(json.dumps({"op": HELLO, "d": {"heartbeat_interval": 45000}}))
        async for frame in ws:
            if frame.type != WSMsgType.TEXT:
                continue
            op = json.loads(frame.data)["op"]
            if op == HEARTBEAT:
                await ws.send_str(json.dumps({"op": HEARTBEAT_ACK}))
            elif op == IDENTIFY:
                await self._dispatch("READY", p.ready(self.bot_user, self.guild_id, self.gateway_url))
                channels = [c for c in self.channels.values() if c.get("guild_id") == self.guild_id]
                await self._dispatch(
                    "GUILD_CREATE", p.guild_create(self.guild_id, self.human["id"], channels, self.bot_user)
                )
            elif op == RESUME:
                await self._dispatch("RESUMED", {})
        self._sockets.remove(ws)
        return ws

    # --- REST ----------------------------------------------------------------------------------
    @staticmethod
    def _respond(status: int, data: Any, headers: dict[str, str] | None = None) -> web.Response:
        if data is None:
            return web.Response(status=204)  # like Discord: no body, no content type
        body = json.dumps(data).encode()
        return web.Response(
            body=body, status=status, headers={"Content-Type": "application/json", **(headers or {})}
        )

    def _too_many(self, retry_after: float) -> web.Response:
        data = {"message": "You are being rate limited.", "retry_after": retry_after, "global": False}
        headers = {"Via": "1.1 google", "Retry-After": str(retry_after), "X-RateLimit-Scope": "user"}
        return self._respond(429, data, headers)

    def _limited(self, method: str, path: str, limits: list[_RateLimit] | None = None) -> _RateLimit | None:
        with self._lock:
            for limit in self._limits if limits is None else limits:
                if (
                    limit.remaining > 0
                    and limit.method in (None, method)
                    and re.search(limit.path or "", path)
                ):
                    limit.remaining -= 1
                    return limit
        return None

    async def _rest(self, request: web.Request) -> web.Response:
        path = "/" + unquote(request.match_info["tail"])
        body = await request.json() if request.can_read_body else None
        call = Call(request.method, path, dict(request.query), body)
        with self._lock:
            self.calls.append(call)
        hold = self._hold_for(request.method, path)
        if hold is not None:
            self.held.append(call)
            await asyncio.get_running_loop().run_in_executor(None, hold[0].wait, hold[1])
            self.released.append(call)
        with self._lock:
            down = self._outage
            down_now = (
                down is not None
                and down.method in (None, request.method)
                and re.search(down.path or "", path)
            )
        if down is not None and down_now:
            call.status = self._outage_status
            if call.status == 429:
                return self._too_many(down.retry_after)
            return self._respond(call.status, {"message": f"{call.status}: Internal Server Error", "code": 0})
        if self._limited(request.method, path, self._refusals) is not None:
            call.status = self._refusal_status
            return self._respond(call.status, {"message": "Missing Permissions", "code": 50013})
        limit = self._limited(request.method, path)
        if limit is not None:
            call.status = 429
            return self._too_many(limit.retry_after)
        with self._lock:
            call.status, data = self._route(
                request.method, path, body if body is not None else {}, call.query
            )
        return self._respond(call.status, data)

    def _route(self, method: str, path: str, body: Any, query: dict[str, str]) -> Result:
        parts = path.strip("/").split("/")
        if path == "/users/@me":
            return 200, self.bot_user
        if path == "/oauth2/applications/@me":
            return 200, p.application(self.bot_user)
        if path in ("/gateway/bot", "/gateway"):
            limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
            return 200, {"url": self.gateway_url, "shards": 1, "session_start_limit": limit}
        if path == "/users/@me/channels" and method == "POST":
            channel_id = p.snowflake()
            self.channels[channel_id] = p.dm_channel(channel_id, self.admin)
            return 200, self.channels[channel_id]
        if parts[0] == "channels":
            return self._channel_route(method, parts[1:], body, query)
        if parts[0] == "applications" and method == "PUT" and parts[-1] == "commands":
            self.command_route = path
            self.commands = [
                {**c, "id": p.snowflake(), "application_id": self.bot_id, "version": "1"} for c in body
            ]
            return 200, self.commands
        if parts[0] == "interactions" and parts[-1] == "callback":
            if body.get("type") == 9 and not p.modal_fits(body.get("data") or {}):
                return 400, {"message": "Invalid Form Body", "code": 50035}
            return 200, self._callback(parts[1], parts[2], body)
        if parts[0] == "webhooks":
            return self._webhook(method, parts[2], parts[3:], body)
        return 404, {"message": "404: Not Found", "code": 0}

    def _channel_route(
        self, method: str, parts: list[str], body: dict[str, Any], query: dict[str, str]
    ) -> Result:
        channel = parts[0]
        if channel not in self.channels:
            return 404, {"message": "Unknown Channel", "code": 10003}
        if len(parts) == 1:
            return 200, self.channels[channel]
        if parts[1:] == ["typing"] and method == "POST":
            return 204, None
        if parts[1:] == ["messages"] and method == "POST":
            return 200, self._create_message(channel, body)
        if parts[1:] == ["messages"] and method == "GET":
            return 200, self._channel_history(channel, query)
        message = self.messages.get(parts[2] if len(parts) > 2 else "")
        if message is None or (method == "GET" and message["channel_id"] != channel):
            return 404, {"message": "Unknown Message", "code": 10008}
        if len(parts) == 3 and method == "GET":
            return 200, self._with_referenced(message)
        if len(parts) == 3 and method == "PATCH":
            self._edit(message, body)
            return 200, message
        if len(parts) >= 5 and parts[3] == "reactions":
            self.reactions.append((method, channel, message["id"], parts[4]))
            return 204, None
        if parts[3:] == ["threads"] and method == "POST":
            if self.forbid_threads:
                return 403, {"message": "Missing Permissions", "code": 50013}
            if message["id"] in self.channels:
                return 400, {
                    "message": "A thread has already been created for this message",
                    "code": THREAD_EXISTS,
                }
            archive = body.get("auto_archive_duration", 1440)
            made = p.thread(message["id"], channel, self.guild_id, self.bot_id, body.get("name", ""), archive)
            self.channels[message["id"]] = made
            if self.announce_threads:
                event = {**made, "newly_created": True}
                self._pending.add(asyncio.ensure_future(self._dispatch("THREAD_CREATE", event)))
            return 201, made
        return 404, {"message": "404: Not Found", "code": 0}

    def _channel_history(self, channel: str, query: dict[str, str]) -> list[dict[str, Any]]:
        """GET /channels/{id}/messages as Discord answers it: newest first, at most `limit`
        (default 50, at most 100), those older than `before` when given."""
        limit = max(1, min(int(query.get("limit") or 50), 100))
        before = int(query["before"]) if query.get("before") else None
        found = [
            m
            for m in self.messages.values()
            if m["channel_id"] == channel and (before is None or int(m["id"]) < before)
        ]
        newest = sorted(found, key=lambda m: int(m["id"]), reverse=True)[:limit]
        return [self._with_referenced(m) for m in newest]

    def _with_referenced(self, message: dict[str, Any]) -> dict[str, Any]:
        """The message as Discord shows it: a reply (type 19) carries the message its
        `message_reference` names as `referenced_message` (one level deep; null once deleted),
        wherever that message is: keeping out of other channels is the reader's business."""
        ref = message.get("message_reference")
        if message.get("type") != p.REPLY or not ref:
            return message
        replied = self.messages.get(str(ref.get("message_id")))
        shown = {k: v for k, v in replied.items() if k != "referenced_message"} if replied else None
        return {**message, "referenced_message": shown}

    def delete_message(self, message_id: str) -> None:
        """A user deletes a message: it is gone from every answer (Discord keeps no trace)."""
        with self._lock:
            self.messages.pop(message_id, None)

    def _edit(self, message: dict[str, Any], body: dict[str, Any]) -> None:
        message.update(
            {
                k: v
                for k, v in body.items()
                if k in ("content", "embeds", "flags", "allowed_mentions", "components")
            }
        )
        message["edited_timestamp"] = p.JOINED
        self.history.setdefault(message["id"], []).append(message["content"])

    def _create_message(self, channel: str, body: dict[str, Any]) -> dict[str, Any]:
        nonce = body.get("nonce")
        if nonce and body.get("enforce_nonce") and (channel, nonce) in self._nonces:
            return self.messages[self._nonces[(channel, nonce)]]
        kept = ("embeds", "flags", "allowed_mentions", "message_reference", "components")
        fields = {k: body[k] for k in kept if k in body}
        message = p.message(channel, self.bot_user, body.get("content") or "", **fields)
        self.history[message["id"]] = [message["content"]]
        guild = self.channels.get(channel, {}).get("guild_id")
        if guild:
            message["guild_id"] = guild
        self.messages[message["id"]] = message
        if nonce:
            self._nonces[(channel, nonce)] = message["id"]
        return message

    def _callback(self, interaction_id: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        kind, data = body["type"], body.get("data") or {}
        channel = self._interaction_channels.get(token, self.channel_id)
        if kind in (6, 9):  # a deferred update (nothing shown), or a modal (shown to the clicker)
            if kind == 9:
                self.modals.append(data)
            interaction = {"id": interaction_id, "type": 3, "response_message_loading": False}
            return {"interaction": interaction, "resource": {"type": kind}}
        message = self._create_message(channel, data)
        self.interaction_messages[token] = message["id"]
        ephemeral = bool(message["flags"] & EPHEMERAL)
        return {
            "interaction": {
                "id": interaction_id,
                "type": 2,
                "response_message_id": message["id"],
                "response_message_loading": kind == 5,
                "response_message_ephemeral": ephemeral,
            },
            "resource": {"type": kind, "message": message},
        }

    def _webhook(self, method: str, token: str, rest: list[str], body: dict[str, Any]) -> Result:
        if token not in self.interaction_messages:
            return 404, {"message": "Unknown Webhook", "code": 10015}
        if rest == ["messages", "@original"]:
            original = self.messages[self.interaction_messages[token]]
            if method == "PATCH":
                self._edit(original, body)
            return 200, original
        if not rest and method == "POST":
            return 200, self._create_message(self._interaction_channels.get(token, self.channel_id), body)
        return 404, {"message": "404: Not Found", "code": 0}
