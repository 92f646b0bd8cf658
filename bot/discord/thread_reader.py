"""The earlier messages of the Discord thread a question was asked in.

Called by the worker as the question's job starts (worker/jobs/question_context.py), over REST:
the thread channel's messages before the question (`GET /channels/{thread}/messages`, newest
first, pages of 100, as many as `thread_context_messages` and one page more), and the message
the thread was started from (it has the thread's id, in the parent channel; none for a forum
post or a thread started without one). Only the question's own thread is read. Needs the View
Channel and Read Message History permissions, and the Message Content intent for messages that
do not mention the bot (docs/discord.md). The bot's own messages are left out (its answers are
thread memory already); a deleted message is simply gone (Discord keeps no trace of it).
The question's own message comes last, marked `asking`, with its attachments (bot/discord/files.py):
in a thread, the first page starts at it; a question that opened its thread (or a DM's) is read
alone (`GET /channels/{channel}/messages/{message}`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from discord import DiscordException
from discord.http import HTTPClient, Route

from bot.discord.files import discord_files
from bot.discord.rest import use_api_base
from config.settings import Settings
from worker.conversation.thread import MAX_MESSAGES_READ, ThreadMessage, ThreadUnreadable

PAGE_SIZE = 100  # Discord's most per request
# Message types that are someone's words: DEFAULT, REPLY, CHAT_INPUT_COMMAND, THREAD_STARTER_MESSAGE
WORDS = {0, 19, 20, 21}


def read_thread(settings: Settings, channel: str, thread: str, before: str | None) -> list[ThreadMessage]:
    if not settings.discord_bot_token:
        raise ThreadUnreadable("DISCORD_BOT_TOKEN is not set")
    use_api_base(settings.discord_api_url)
    wanted = min(settings.thread_context_messages + PAGE_SIZE, MAX_MESSAGES_READ)
    token = settings.discord_bot_token.get_secret_value()
    try:
        raw = asyncio.run(
            _read(token, settings.discord_max_ratelimit_wait_seconds, channel, thread, before, wanted)
        )
    except (DiscordException, aiohttp.ClientError, OSError, ValueError) as exc:
        raise ThreadUnreadable(str(exc)) from exc
    return [_message(settings, item, before) for item in raw]


async def _read(
    token: str, max_wait: float, channel: str, thread: str, before: str | None, wanted: int
) -> list[dict[str, Any]]:
    http = HTTPClient(asyncio.get_running_loop(), max_ratelimit_timeout=max_wait)
    try:
        me = await http.static_login(token)
        if thread == before:  # the question opened its thread: its own message only
            return await _own_message(http, channel, before)
        newest: list[dict[str, Any]] = []
        # one past the question's id: the first page starts at the question itself
        cursor = str(int(before) + 1) if before and before.isdigit() else before
        while len(newest) < wanted:
            page: list[dict[str, Any]] = list(
                await http.logs_from(thread, min(PAGE_SIZE, wanted - len(newest)), before=cursor)  # type: ignore[arg-type]
            )
            newest.extend(page)
            if len(page) < PAGE_SIZE or not page:
                break
            cursor = str(page[-1]["id"])
        messages = [*(await _starter(http, channel, thread)), *reversed(newest)]
        return [
            item
            for item in messages
            if item.get("type", 0) in WORDS and (item.get("author") or {}).get("id") != me.get("id")
        ]
    finally:
        await http.close()


async def _own_message(http: HTTPClient, channel: str, message: str) -> list[dict[str, Any]]:
    route = Route(
        "GET", "/channels/{channel_id}/messages/{message_id}", channel_id=channel, message_id=message
    )
    return [await http.request(route)]


async def _starter(http: HTTPClient, channel: str, thread: str) -> list[dict[str, Any]]:
    """The message the thread was started from, when there is one."""
    if channel == thread:
        return []
    try:
        return [
            await http.request(
                Route(
                    "GET",
                    "/channels/{channel_id}/messages/{message_id}",
                    channel_id=channel,
                    message_id=thread,
                )
            )
        ]
    except DiscordException:  # NotFound: a forum post, a thread without one, or deleted
        return []


def _message(settings: Settings, item: dict[str, Any], question: str | None) -> ThreadMessage:
    author = item.get("author") or {}
    member = item.get("member") or {}
    name = member.get("nick") or author.get("global_name") or author.get("username") or "someone"
    files = discord_files(settings, item)
    asking = str(item.get("id")) == question
    return ThreadMessage(str(name), str(item.get("content") or ""), files=files, asking=asking)
