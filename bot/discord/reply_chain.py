"""The chain of messages a Discord question replied to, outside a thread.

In a text channel (or a DM) a question written as a reply ("@codebot why does this fail?"
under a pasted stack trace) has for context the message it replied to, the message that one
replied to, and so on: its reply chain (worker/conversation/chain.py).

- The adapter takes the replied-to message from the gateway event's `message_reference` (never
  from text), and only a reply (not a forward) to a message of the same channel: Discord allows
  references into other channels and guilds, and those are never followed (`replied_to`).
- The worker reads the chain as the job starts, over REST (`read_reply_chain`): each message
  with `GET /channels/{channel}/messages/{id}`, in the question's channel only. A reply's
  `referenced_message` (Discord includes the replied-to message, one level) is used as that
  message, so a request reads two levels. A reference out of the channel ends the chain.
- Each message's attachments come with it (bot/discord/files.py), read by the worker like a
  thread's files.
- A deleted message (`referenced_message: null`, or 404) ends the chain, shown as deleted; the
  bot's own messages are left out (the chain goes on through them); at most `chain_levels`.
- Needs View Channel and Read Message History, and the Message Content intent for the text of
  messages that do not mention the bot (docs/discord.md).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import aiohttp
import discord
from discord import DiscordException, NotFound
from discord.http import HTTPClient, Route

from bot.discord.files import discord_files
from bot.discord.rest import use_api_base
from bot.discord.thread_reader import WORDS
from config.settings import Settings
from worker.conversation.chain import chain_levels
from worker.conversation.thread import ThreadMessage, ThreadUnreadable

REPLY = 19  # MessageType.REPLY: the only messages whose reference is followed
DELETED = ThreadMessage("unknown", "", deleted=True)


def replied_to(message: discord.Message, guild_id: int | None) -> str | None:
    """The id of the message `message` replied to, when it is a reply to a message of its own
    channel (and guild); None otherwise (no reply, a forward, a reference elsewhere)."""
    ref = message.reference
    if message.type is not discord.MessageType.reply or ref is None or ref.message_id is None:
        return None
    if ref.type is not discord.MessageReferenceType.reply or ref.channel_id != message.channel.id:
        return None
    if ref.guild_id is not None and ref.guild_id != guild_id:
        return None
    return str(ref.message_id)


def read_reply_chain(settings: Settings, channel: str, message: str) -> list[ThreadMessage]:
    if not settings.discord_bot_token:
        raise ThreadUnreadable("DISCORD_BOT_TOKEN is not set")
    use_api_base(settings.discord_api_url)
    token = settings.discord_bot_token.get_secret_value()
    wait = settings.discord_max_ratelimit_wait_seconds
    try:
        newest_first = asyncio.run(_walk(token, wait, channel, message, chain_levels(settings)))
    except (DiscordException, aiohttp.ClientError, OSError, ValueError) as exc:
        raise ThreadUnreadable(str(exc)) from exc
    return [
        _chain_message(settings, item) if item is not None else DELETED for item in reversed(newest_first)
    ]


@dataclass(frozen=True)
class _Link:
    """A reply's reference to the message it replied to."""

    message: str  # that message's id, in the question's channel
    shown: dict[str, Any] | None  # that message as the reply showed it (`referenced_message`)
    deleted: bool  # the reply showed it as deleted (`referenced_message: null`)


async def _walk(
    token: str, max_wait: float, channel: str, message: str, levels: int
) -> list[dict[str, Any] | None]:
    """The chain's messages from `message` back, newest first, at most `levels` looked at; None
    where the chain ends at a deleted message."""
    http = HTTPClient(asyncio.get_running_loop(), max_ratelimit_timeout=max_wait)
    try:
        me = str((await http.static_login(token)).get("id"))
        chain: list[dict[str, Any] | None] = []
        link: _Link | None = _Link(message, None, False)
        for _ in range(levels):
            if link is None:
                break
            item = None if link.deleted else (link.shown or await _get(http, channel, link.message))
            if item is None:  # deleted: Discord keeps nothing more of the chain
                chain.append(None)
                break
            author = item.get("author") or {}
            if item.get("type", 0) in WORDS and str(author.get("id")) != me:
                chain.append(item)
            link = _link(item, channel)
        return chain
    finally:
        await http.close()


async def _get(http: HTTPClient, channel: str, message: str) -> dict[str, Any] | None:
    """The message, None when Discord no longer has it (deleted)."""
    route = Route(
        "GET", "/channels/{channel_id}/messages/{message_id}", channel_id=channel, message_id=message
    )
    try:
        found: dict[str, Any] = await http.request(route)
    except NotFound:
        return None
    return found


def _link(item: dict[str, Any], channel: str) -> _Link | None:
    """What `item` replied to, when that is a message of `channel` older than `item`."""
    ref = item.get("message_reference") or {}
    target = str(ref.get("message_id") or "")
    if item.get("type") != REPLY or ref.get("type", 0) != 0 or str(ref.get("channel_id")) != channel:
        return None
    if not (target.isdigit() and str(item.get("id", "")).isdigit() and int(target) < int(item["id"])):
        return None  # a reply is always to an older message: nothing else is followed (no loops)
    if "referenced_message" not in item:
        return _Link(target, None, False)
    shown = item["referenced_message"]
    if shown is None:
        return _Link(target, None, True)
    same = str(shown.get("id")) == target and str(shown.get("channel_id")) == channel
    return _Link(target, shown if same else None, False)


def _chain_message(settings: Settings, item: dict[str, Any]) -> ThreadMessage:
    author = item.get("author") or {}
    member = item.get("member") or {}
    name = member.get("nick") or author.get("global_name") or author.get("username") or "someone"
    return ThreadMessage(str(name), str(item.get("content") or ""), files=discord_files(settings, item))
