"""A local Discord for tests: the REST routes codebot uses and a real-protocol gateway.

The real discord.py client (adapter) and the worker's REST sink talk to it over loopback:

    fake = FakeDiscord(); fake.start()
    settings = load_settings(..., discord_api_url=fake.base_url)
    fake.message_create(f"<@{fake.bot_id}> how does retry work?", mentions=[fake.bot_user])
    fake.wait_for(lambda: fake.reactions_on(message_id))

REST: every call is recorded (`calls`), answered with `Content-Type: application/json`
exactly (discord.py parses nothing else, PLATFORM_NOTES pitfall 17), and `rate_limit(K, s)`
answers the next K matching calls with 429 and `retry_after` s (with `Via`, or discord.py
takes it for a Cloudflare ban). Messages honour `nonce` + `enforce_nonce` like Discord: the
same nonce in a channel returns the earlier message. A thread started from a message has
the message's id, and starting a second one fails with code 160004.

Gateway: HELLO (op 10), IDENTIFY (op 2) → READY (bot user, application, one unavailable
guild) then GUILD_CREATE (a text channel), heartbeat ACKs (op 11). Tests inject dispatches
(MESSAGE_CREATE, INTERACTION_CREATE, …) with increasing sequence numbers. Ids are real
snowflakes (19 digits) so discord.py's timestamps and mention regexes work.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from aiohttp import WSMsgType, web

DISCORD_EPOCH_MS = 1420070400000
API_PREFIX = "/api/v10"
HELLO, IDENTIFY, HEARTBEAT, RESUME, HEARTBEAT_ACK, DISPATCH = 10, 2, 1, 6, 11, 0
THREAD_EXISTS = 160004


@dataclass
class Call:
    method: str
    path: str  # without the /api/v10 prefix, e.g. /channels/1/messages
    query: dict[str, str]
    body: Any
    status: int = 200


@dataclass
class _RateLimit:
    remaining: int
    retry_after: float
    method: str | None
    path: str | None  # a regex searched in the path


class FakeDiscord:
    def __init__(self) -> None:
        self._counter = itertools.count()
        self.bot_user = self.user("codebot", bot=True)
        self.human = self.user("alice")
        self.admin = self.user("root")
        self.application: dict[str, Any] = {
            "id": self.bot_user["id"],
            "name": "codebot",
            "description": "",
            "icon": None,
            "bot_public": True,
            "bot_require_code_grant": False,
            "verify_key": "0" * 64,
            "flags": 0,
            "owner": self.user("owner"),
            "team": None,
        }
        self.guild_id = self.snowflake()
        self.channel_id = self.snowflake()
        self.calls: list[Call] = []
        self.messages: dict[str, dict[str, Any]] = {}
        self.channels: dict[str, dict[str, Any]] = {
            self.channel_id: self._text_channel(self.channel_id, "general")
        }
        self.reactions: list[tuple[str, str, str, str]] = []  # (method, channel, message, emoji)
        self.interaction_messages: dict[str, str] = {}  # interaction token -> @original message id
        self.commands: list[dict[str, Any]] = []
        self._interaction_channels: dict[str, str] = {}
        self._nonces: dict[tuple[str, str], str] = {}
        self._limits: list[_RateLimit] = []
        self._sockets: list[web.WebSocketResponse] = []
        self._sequence = 0
        self._pending: set[asyncio.Future[None]] = set()  # dispatches started from REST handlers
        self._lock = threading.Lock()
        self.identified = threading.Event()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fake-discord", daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- ids and objects ---------------------------------------------------------------------
    def snowflake(self) -> str:
        ms = int(time.time() * 1000) - DISCORD_EPOCH_MS
        return str((ms << 22) | (next(self._counter) % (1 << 22)))

    def user(self, name: str, bot: bool = False) -> dict[str, Any]:
        return {
            "id": self.snowflake(),
            "username": name,
            "discriminator": "0",
            "global_name": name,
            "avatar": None,
            "bot": bot,
            "public_flags": 0,
        }

    @property
    def bot_id(self) -> str:
        return str(self.bot_user["id"])

    def _text_channel(self, channel_id: str, name: str) -> dict[str, Any]:
        return {
            "id": channel_id,
            "type": 0,
            "guild_id": self.guild_id,
            "name": name,
            "position": 0,
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": None,
            "topic": None,
            "last_message_id": None,
            "rate_limit_per_user": 0,
            "flags": 0,
        }

    def _message(self, channel_id: str, author: dict[str, Any], content: str, **extra: Any) -> dict[str, Any]:
        message = {
            "id": self.snowflake(),
            "channel_id": channel_id,
            "author": author,
            "content": content,
            "timestamp": "2026-01-01T00:00:00+00:00",
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
            "components": [],
        }
        message.update(extra)
        return message

    # --- lifecycle -----------------------------------------------------------------------------
    def start(self) -> FakeDiscord:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self.loop).result(10)
        return self

    def close(self) -> None:
        async def stop() -> None:
            for ws in list(self._sockets):
                await ws.close()
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{API_PREFIX}"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_route("*", API_PREFIX + "/{tail:.*}", self._rest)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    # --- test controls -------------------------------------------------------------------------
    def rate_limit(
        self, calls: int, retry_after: float, method: str | None = None, path: str | None = None
    ) -> None:
        """Answer the next `calls` matching REST calls with 429 and this retry_after."""
        with self._lock:
            self._limits.append(_RateLimit(calls, retry_after, method, path))

    def find(self, method: str, path: str) -> list[Call]:
        """Recorded calls whose path matches the regex (searched), in order."""
        with self._lock:
            return [c for c in self.calls if c.method == method and re.search(path, c.path)]

    def posted(self, channel: str) -> list[dict[str, Any]]:
        """Messages the bot created in a channel, in order, as they are now (after edits)."""
        with self._lock:
            return [
                m
                for m in self.messages.values()
                if m["channel_id"] == channel and m["author"]["id"] == self.bot_id
            ]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.02)
        raise AssertionError(
            f"timed out after {timeout} s; calls so far: {[(c.method, c.path) for c in self.calls]}"
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
        guild: bool = True,
        **extra: Any,
    ) -> dict[str, Any]:
        """Inject a user's message (MESSAGE_CREATE); returns its payload."""
        author = author or self.human
        message = self._message(channel or self.channel_id, author, content, mentions=mentions or [], **extra)
        if guild:
            message["guild_id"] = self.guild_id
            message["member"] = {
                "roles": [],
                "joined_at": "2025-01-01T00:00:00+00:00",
                "deaf": False,
                "mute": False,
                "flags": 0,
            }
        with self._lock:
            self.messages[message["id"]] = message
        self.dispatch("MESSAGE_CREATE", message)
        return message

    def dm_channel(self) -> str:
        channel_id = self.snowflake()
        with self._lock:
            self.channels[channel_id] = {
                "id": channel_id,
                "type": 1,
                "recipients": [self.human],
                "last_message_id": None,
            }
        return channel_id

    def interaction(
        self,
        sub: str,
        options: dict[str, str] | None = None,
        user: dict[str, Any] | None = None,
        channel: str | None = None,
    ) -> dict[str, Any]:
        """Inject `/codebot <sub> option:value…` (INTERACTION_CREATE, type 2); returns its payload."""
        channel = channel or self.channel_id
        command = next((c for c in self.commands if c["name"] == "codebot"), {"id": self.snowflake()})
        sub_options = [{"name": k, "type": 3, "value": v} for k, v in (options or {}).items()]
        data = {
            "id": self.snowflake(),
            "application_id": self.bot_id,
            "type": 2,
            "token": f"tok{self.snowflake()}",
            "version": 1,
            "guild_id": self.guild_id,
            "channel_id": channel,
            "channel": self.channels.get(channel, self._text_channel(channel, "x")),
            "member": {
                "user": user or self.human,
                "roles": [],
                "joined_at": "2025-01-01T00:00:00+00:00",
                "deaf": False,
                "mute": False,
                "flags": 0,
                "permissions": "0",
            },
            "app_permissions": "0",
            "locale": "en-US",
            "guild_locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": self.guild_id},
            "context": 0,
            "data": {
                "id": command["id"],
                "name": "codebot",
                "type": 1,
                "guild_id": self.guild_id,
                "options": [{"name": sub, "type": 1, "options": sub_options}],
            },
        }
        with self._lock:
            self._interaction_channels[data["token"]] = channel
        self.dispatch("INTERACTION_CREATE", data)
        return data

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
            payload = json.loads(frame.data)
            if payload["op"] == HEARTBEAT:
                await ws.send_str(json.dumps({"op": HEARTBEAT_ACK}))
            elif payload["op"] == IDENTIFY:
                await self._ready()
            elif payload["op"] == RESUME:
                await self._dispatch("RESUMED", {})
        self._sockets.remove(ws)
        return ws

    async def _ready(self) -> None:
        await self._dispatch(
            "READY",
            {
                "v": 10,
                "user": self.bot_user,
                "guilds": [{"id": self.guild_id, "unavailable": True}],
                "session_id": "fake-session",
                "resume_gateway_url": self.gateway_url,
                "private_channels": [],
                "relationships": [],
                "application": {"id": self.bot_id, "flags": 0},
            },
        )
        bot_member = {
            "user": self.bot_user,
            "roles": [],
            "joined_at": "2025-01-01T00:00:00+00:00",
            "deaf": False,
            "mute": False,
            "flags": 0,
        }
        await self._dispatch(
            "GUILD_CREATE",
            {
                "id": self.guild_id,
                "name": "Team",
                "icon": None,
                "owner_id": self.human["id"],
                "roles": [
                    {
                        "id": self.guild_id,
                        "name": "@everyone",
                        "permissions": "0",
                        "position": 0,
                        "color": 0,
                        "hoist": False,
                        "managed": False,
                        "mentionable": False,
                        "flags": 0,
                    }
                ],
                "channels": [c for c in self.channels.values() if c.get("guild_id") == self.guild_id],
                "threads": [],
                "members": [bot_member],
                "member_count": 2,
                "emojis": [],
                "stickers": [],
                "features": [],
                "large": False,
                "unavailable": False,
                "joined_at": "2025-01-01T00:00:00+00:00",
                "presences": [],
                "voice_states": [],
                "stage_instances": [],
                "guild_scheduled_events": [],
                "premium_tier": 0,
                "mfa_level": 0,
                "verification_level": 0,
                "explicit_content_filter": 0,
                "default_message_notifications": 0,
                "system_channel_flags": 0,
                "preferred_locale": "en-US",
                "nsfw_level": 0,
                "afk_timeout": 300,
            },
        )
        self.identified.set()

    # --- REST ----------------------------------------------------------------------------------
    @staticmethod
    def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
        if data is None:
            return web.Response(status=204)  # like Discord: no body, no content type
        return web.Response(
            body=json.dumps(data).encode(),
            status=status,
            headers={"Content-Type": "application/json", **(headers or {})},
        )

    def _limited(self, method: str, path: str) -> _RateLimit | None:
        with self._lock:
            for limit in self._limits:
                if (
                    limit.remaining > 0
                    and (limit.method in (None, method))
                    and (limit.path is None or re.search(limit.path, path))
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
        limit = self._limited(request.method, path)
        if limit is not None:
            call.status = 429
            return self._json(
                {
                    "message": "You are being rate limited.",
                    "retry_after": limit.retry_after,
                    "global": False,
                    "code": 0,
                },
                429,
                {"Via": "1.1 google", "Retry-After": str(limit.retry_after), "X-RateLimit-Scope": "user"},
            )
        status, data = self._route(request.method, path, body or {})
        call.status = status
        return self._json(data, status)

    def _route(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        parts = path.strip("/").split("/")
        with self._lock:
            if path == "/users/@me" and method == "GET":
                return 200, self.bot_user
            if path == "/oauth2/applications/@me":
                return 200, self.application
            if path in ("/gateway/bot", "/gateway"):
                return 200, {
                    "url": self.gateway_url,
                    "shards": 1,
                    "session_start_limit": {
                        "total": 1000,
                        "remaining": 999,
                        "reset_after": 0,
                        "max_concurrency": 1,
                    },
                }
            if path == "/users/@me/channels" and method == "POST":
                channel_id = self.snowflake()
                self.channels[channel_id] = {"id": channel_id, "type": 1, "recipients": [self.human]}
                return 200, self.channels[channel_id]
            if parts[0] == "channels":
                return self._channel_route(method, parts[1:], body)
            if parts[0] == "applications" and method == "PUT" and parts[-1] == "commands":
                return 200, self._commands(body, parts)
            if parts[0] == "interactions" and parts[-1] == "callback":
                return 200, self._callback(parts[1], parts[2], body)
            if parts[0] == "webhooks":
                return self._webhook(method, parts[2], parts[3:], body)
        return 404, {"message": "404: Not Found", "code": 0}

    def _channel_route(self, method: str, parts: list[str], body: dict[str, Any]) -> tuple[int, Any]:
        channel = parts[0]
        if len(parts) == 1 and method == "GET":
            found = self.channels.get(channel)
            return (200, found) if found else (404, {"message": "Unknown Channel", "code": 10003})
        if channel not in self.channels:
            return 404, {"message": "Unknown Channel", "code": 10003}
        if parts[1:] == ["messages"] and method == "POST":
            return 200, self._create_message(channel, body)
        message = parts[2] if len(parts) > 2 else ""
        if message not in self.messages:
            return 404, {"message": "Unknown Message", "code": 10008}
        if len(parts) == 3 and method == "PATCH":
            self.messages[message].update(
                {k: v for k, v in body.items() if k in ("content", "embeds", "flags")}
            )
            self.messages[message]["edited_timestamp"] = "2026-01-01T00:00:01+00:00"
            self.messages[message]["allowed_mentions"] = body.get("allowed_mentions")
            return 200, self.messages[message]
        if len(parts) >= 5 and parts[3] == "reactions":
            self.reactions.append((method, channel, message, parts[4]))
            return 204, None
        if parts[3:] == ["threads"] and method == "POST":
            if message in self.channels:
                return 400, {
                    "message": "A thread has already been created for this message",
                    "code": THREAD_EXISTS,
                }
            thread = {
                "id": message,
                "type": 11,
                "guild_id": self.guild_id,
                "parent_id": channel,
                "name": body.get("name"),
                "owner_id": self.bot_id,
                "last_message_id": None,
                "rate_limit_per_user": 0,
                "message_count": 0,
                "member_count": 1,
                "flags": 0,
                "thread_metadata": {
                    "archived": False,
                    "auto_archive_duration": body.get("auto_archive_duration", 1440),
                    "archive_timestamp": "2026-01-01T00:00:00+00:00",
                    "locked": False,
                },
            }
            self.channels[message] = thread
            self._pending.add(
                asyncio.ensure_future(self._dispatch("THREAD_CREATE", {**thread, "newly_created": True}))
            )
            return 201, thread
        return 404, {"message": "404: Not Found", "code": 0}

    def _create_message(self, channel: str, body: dict[str, Any], **extra: Any) -> dict[str, Any]:
        nonce = body.get("nonce")
        if nonce and body.get("enforce_nonce") and (channel, nonce) in self._nonces:
            return self.messages[self._nonces[(channel, nonce)]]
        message = self._message(
            channel,
            self.bot_user,
            body.get("content") or "",
            embeds=body.get("embeds", []),
            flags=body.get("flags", 0),
            **extra,
        )
        message["allowed_mentions"] = body.get("allowed_mentions")
        message["message_reference"] = body.get("message_reference")
        guild = self.channels.get(channel, {}).get("guild_id")
        if guild:
            message["guild_id"] = guild
        self.messages[message["id"]] = message
        if nonce:
            self._nonces[(channel, nonce)] = message["id"]
        return message

    def _commands(self, body: list[dict[str, Any]], parts: list[str]) -> list[dict[str, Any]]:
        self.commands = [
            {
                **c,
                "id": self.snowflake(),
                "application_id": self.bot_id,
                "version": "1",
                **({"guild_id": parts[3]} if "guilds" in parts else {}),
            }
            for c in body
        ]
        return self.commands

    def _callback(self, interaction_id: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        kind, data = body["type"], body.get("data") or {}
        channel = self._interaction_channels.get(token, self.channel_id)
        message = self._create_message(channel, {"content": data.get("content", "")}, interaction_token=token)
        message["flags"] = data.get("flags", 0)
        self.interaction_messages[token] = message["id"]
        return {
            "interaction": {
                "id": interaction_id,
                "type": 2,
                "response_message_id": message["id"],
                "response_message_loading": kind == 5,
                "response_message_ephemeral": bool(message["flags"] & 64),
            },
            "resource": {"type": kind, "message": message},
        }

    def _webhook(self, method: str, token: str, rest: list[str], body: dict[str, Any]) -> tuple[int, Any]:
        if token not in self.interaction_messages:
            return 404, {"message": "Unknown Webhook", "code": 10015}
        if rest == ["messages", "@original"]:
            message = self.messages[self.interaction_messages[token]]
            if method == "PATCH":
                message.update({k: v for k, v in body.items() if k in ("content", "embeds")})
                message["allowed_mentions"] = body.get("allowed_mentions")
            return 200, message
        if not rest and method == "POST":
            channel = self._interaction_channels.get(token, self.channel_id)
            message = self._create_message(channel, body, interaction_token=token)
            return 200, message
        return 404, {"message": "404: Not Found", "code": 0}
