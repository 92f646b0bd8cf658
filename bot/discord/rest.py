"""Discord over REST only, for processes without a gateway connection (the worker).

discord.py's HTTPClient does the requests, so its 429 handling applies: it sleeps the
`retry_after` Discord sends and tries again (docs/platform-notes.md §2f). Logging in costs a single
`GET /users/@me` (HTTPClient.static_login), not the two of `Client.login()` (§2e, pitfall 15).

Every message carries `allowed_mentions` that parse nothing, so `@everyone`, `@here`, role
and user mentions in model output stay inert, and replies do not ping the asker (§2h).
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import discord
from discord.http import HTTPClient, Route

NO_MENTIONS: dict[str, Any] = {"parse": [], "replied_user": False}
THREAD_ALREADY_EXISTS = 160004  # Discord error code: the message already has a thread


def use_api_base(api_url: str) -> None:
    """Point every discord.py REST call (and webhook) of this process at DISCORD_API_URL."""
    Route.BASE = api_url.rstrip("/")


class DiscordRest:
    """The few REST calls the worker makes, with mentions always disabled."""

    def __init__(self, token: str, max_ratelimit_wait_seconds: float) -> None:
        self._token = token
        self._max_wait = max_ratelimit_wait_seconds
        self._http: HTTPClient | None = None
        self._webhook_session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        """Log in once (idempotent)."""
        if self._http is not None:
            return
        http = HTTPClient(asyncio.get_running_loop(), max_ratelimit_timeout=self._max_wait)
        await http.static_login(self._token)
        self._http = http

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None
        if self._webhook_session is not None:
            await self._webhook_session.close()
            self._webhook_session = None

    @property
    def http(self) -> HTTPClient:
        if self._http is None:
            raise RuntimeError("DiscordRest.open() was not awaited")
        return self._http

    async def react(self, channel: str, message: str, emoji: str) -> None:
        await self.http.add_reaction(channel, message, emoji)

    async def unreact(self, channel: str, message: str, emoji: str) -> None:
        await self.http.remove_own_reaction(channel, message, emoji)

    async def create_thread(self, channel: str, message: str, name: str, archive_minutes: int) -> str:
        """A public thread started from `message`; its id is the message's id."""
        data = await self.http.start_thread_with_message(
            channel,
            message,
            name=name,
            auto_archive_duration=archive_minutes,  # type: ignore[arg-type]
        )
        return str(data["id"])

    async def send(
        self,
        channel: str,
        content: str,
        nonce: str,
        reference: tuple[str, str] | None = None,
        embed: dict[str, Any] | None = None,
    ) -> str:
        """Post a message; with the same nonce Discord returns the earlier message instead."""
        return str((await self.post(channel, content, nonce, reference, embed))["id"])

    async def post(
        self,
        channel: str,
        content: str,
        nonce: str,
        reference: tuple[str, str] | None = None,
        embed: dict[str, Any] | None = None,
        components: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """`send`, returning the message as Discord has it: for a nonce seen before, the earlier
        message with its earlier content."""
        payload: dict[str, Any] = {
            "content": content,
            "nonce": nonce,
            "enforce_nonce": True,
            "allowed_mentions": NO_MENTIONS,
        }
        if components is not None:
            payload["components"] = components
        if reference is not None:
            ref_channel, ref_message = reference
            payload["message_reference"] = {
                "message_id": ref_message,
                "channel_id": ref_channel,
                "fail_if_not_exists": False,
            }
        if embed is not None:
            payload["embeds"] = [embed]
        route = Route("POST", "/channels/{channel_id}/messages", channel_id=channel)
        data: dict[str, Any] = await self.http.request(route, json=payload)
        return data

    async def edit(
        self,
        channel: str,
        message: str,
        content: str,
        embed: dict[str, Any] | None = None,
        components: list[dict[str, Any]] | None = None,
    ) -> None:
        payload: dict[str, Any] = {"content": content, "allowed_mentions": NO_MENTIONS}
        if embed is not None:
            payload["embeds"] = [embed]
        if components is not None:
            payload["components"] = components
        route = Route(
            "PATCH", "/channels/{channel_id}/messages/{message_id}", channel_id=channel, message_id=message
        )
        await self.http.request(route, json=payload)

    async def typing(self, channel: str) -> None:
        """The "codebot is typing…" indicator (lasts about 10 s, or until a message is sent)."""
        await self.http.send_typing(channel)

    async def dm_channel(self, user: str) -> str:
        """The DM channel with a user (created if needed)."""
        data = await self.http.start_private_message(user)
        return str(data["id"])

    async def followup(self, application_id: str, token: str, content: str, ephemeral: bool) -> None:
        """A follow-up to an application command (valid 15 min): an *application* webhook, the
        only kind that may send ephemeral messages (docs/platform-notes.md, pitfall 11)."""
        if self._webhook_session is None:
            self._webhook_session = aiohttp.ClientSession()
        data: Any = {"id": int(application_id), "type": 3, "token": token}
        webhook = discord.Webhook(data, session=self._webhook_session)
        none = discord.AllowedMentions.none()
        await webhook.send(content, ephemeral=ephemeral, allowed_mentions=none, wait=True)
