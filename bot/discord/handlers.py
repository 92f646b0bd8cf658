"""What the Discord adapter does with a message: decide whether it is a question, hand it to
the intake (bot/intake.py, shared with Slack), render the outcome.

Triggers (docs/platform-notes.md §2a, pitfalls 7 and 12):
- a message whose `mentions` include the bot user. `@everyone`/`@here` and role mentions do not
  count (`ClientUser.mentioned_in` would say yes to @everyone, so it is not used);
- every message in a DM with the bot;
- any message in a thread the bot opened for a question (a follow-up: the thread's earlier
  questions and answers go with it). A mention inside some other thread is answered there,
  but that thread does not become a conversation with the bot.
Ignored: bots (the bot itself included), webhooks, system messages, edits (MESSAGE_UPDATE has
no handler).

Scoping: `repo:NAME` in the text (a follow-up naming none keeps the last one named in its
thread), and allow-lists keyed `discord:<channel id>`. A thread is governed by its parent
channel (a forum post by its forum). A DM's key is its DM channel id.
A guild id in `channels` does NOT grant the guild's channels: in older guilds the first text
channel has the guild's id, so such an entry would silently widen access.

Every blocking Redis call (the intake's) runs in a worker thread (`asyncio.to_thread`) so a
slow or dead Redis never stalls the gateway heartbeat.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace

import discord
from redis import Redis

from bot.discord.format import one_message, strip_mentions_of
from bot.discord.reply_chain import replied_to
from bot.intake import REDIS_DOWN, Ask, Intake, Outcome
from config.settings import Settings
from worker.jobs.question import ReplyTarget
from worker.ops.redis_connection import RedisUnavailable, connect

log = logging.getLogger("codebot.discord")

THREADABLE = (discord.ChannelType.text, discord.ChannelType.news)
USER_MESSAGE_TYPES = (discord.MessageType.default, discord.MessageType.reply)


class RedisHolder:
    """The adapter's Redis connection: made at start when possible, else on first use."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._client: Redis | None = None

    def start(self) -> None:
        try:
            self._client = connect(self.settings)
        except RedisUnavailable as exc:
            log.warning("Redis is unreachable at start (%s); questions will be refused until it is back", exc)

    def get(self) -> Redis:
        if self._client is None:
            self._client = connect(self.settings, start_embedded=False)
        return self._client


@dataclass(frozen=True)
class Place:
    """Where a message was written, in codebot's terms."""

    channel: str  # what allow-lists name: the parent channel of a thread, the DM channel for DMs
    thread: str | None  # the thread it was written in
    guild: str | None
    can_thread: bool  # a thread can be started from a message here (guild text or news channel)

    @property
    def is_dm(self) -> bool:
        return self.guild is None

    @property
    def key(self) -> str:
        return f"discord:{self.channel}"

    def ask(self, asker: str, text: str, message: str, identity: str, replied_to: str | None = None) -> Ask:
        """The question written here as `message` (whose 👀 ✅ ⚠️ it gets); `identity` is what
        makes it unique (the message id, or `i<interaction id>` for `/codebot ask`); `replied_to`
        the message of this channel it replied to, outside a thread (its chain is the context)."""
        # A question in a text or news channel gets a thread started from its message (Discord
        # gives the thread the message's id); in a thread it is answered there; else a reply.
        thread = self.thread or (message if self.can_thread else None)
        target = ReplyTarget(
            platform="discord",
            channel=self.channel,
            thread=thread,
            message=message,
            guild=self.guild,
            is_dm=self.is_dm,
            replied_to=None if self.thread else replied_to,
        )
        return Ask(
            asker=asker,
            text=text,
            target=target,
            identity=(identity,),
            conversation=thread,
            in_thread=self.thread is not None,
            opens_thread=thread is not None and thread == message,
        )


def place_of_channel(channel: object, guild_id: int | None) -> Place | None:
    """The place for a channel object; None when discord.py's cache does not know the channel
    (a PartialMessageable, e.g. a thread created while the adapter was not running)."""
    channel_id = str(getattr(channel, "id", ""))
    if guild_id is None:
        return Place(channel_id, None, None, can_thread=False)
    if isinstance(channel, discord.Thread):
        return Place(str(channel.parent_id), channel_id, str(guild_id), can_thread=False)
    channel_type = getattr(channel, "type", None)
    if isinstance(channel, discord.PartialMessageable) or channel_type is None:
        return None
    return Place(channel_id, None, str(guild_id), can_thread=channel_type in THREADABLE)


def guild_of(message: discord.Message) -> int | None:
    """The guild id, also when the guild is not (yet) in the cache; None for DMs."""
    if message.guild is not None:
        return message.guild.id
    guild_id = getattr(message.channel, "guild_id", None)
    return guild_id if isinstance(guild_id, int) else None


async def mark_received(
    client: discord.Client, intake: Intake, message: discord.Message, outcome: Outcome
) -> None:
    """👀 on a question just enqueued. A fast worker may answer it, and take its 👀 off, before
    ours lands (discord.py retries a 5xx, ~16 s, and waits out 429s; an event loop may be busy):
    a question answered by the time ours is on gets ours taken off. The worker stores the
    answered marker before it takes 👀 off, so one of the two removals comes after our add."""
    await message.add_reaction("👀")
    question, me = outcome.question, client.user
    answered = question is not None and await asyncio.to_thread(intake.already_answered, question.id)
    if answered and me is not None:
        await message.remove_reaction("👀", me)


class MessageHandler:
    def __init__(self, client: discord.Client, intake: Intake, settings: Settings) -> None:
        self.client = client
        self.intake = intake
        # Without the Message Content intent a follow-up's text is empty unless it mentions the bot.
        self.follow_ups_need_mention = not settings.discord_message_content_intent

    async def on_message(self, message: discord.Message) -> None:
        me = self.client.user
        if me is None or message.author.bot or message.author.id == me.id or message.webhook_id:
            return
        if message.type not in USER_MESSAGE_TYPES:
            return
        mentioned = me.id in {user.id for user in message.mentions}
        place = await self._place(message, mentioned)
        if place is None:
            return
        if not (mentioned or place.is_dm):
            if self.follow_ups_need_mention or place.thread is None:
                return
            try:
                if await asyncio.to_thread(self.intake.thread_parent, "discord", place.thread) is None:
                    return
            except REDIS_DOWN:
                return  # cannot tell whether this thread is ours: stay quiet rather than spam
        text = strip_mentions_of(message.content, me.id)
        if not (text or mentioned or place.is_dm):
            return  # a follow-up with nothing to ask (an image, a sticker): not a question
        reply = replied_to(message, guild_of(message))  # from the event's reference, never from text
        ask = place.ask(str(message.author.id), text, str(message.id), str(message.id), reply)
        ask = replace(ask, attached_files=len(message.attachments))  # read by the worker
        outcome = await asyncio.to_thread(self.intake.submit, ask)
        await self._deliver(message, outcome)

    async def _place(self, message: discord.Message, mentioned: bool) -> Place | None:
        guild_id = guild_of(message)
        place = place_of_channel(message.channel, guild_id)
        if place is not None or guild_id is None:
            return place
        channel_id = str(message.channel.id)
        try:
            parent = await asyncio.to_thread(self.intake.thread_parent, "discord", channel_id)
        except REDIS_DOWN:
            parent = None
        if parent is not None:
            return Place(parent, channel_id, str(guild_id), can_thread=False)
        if not mentioned:
            return None
        try:
            channel = await self.client.fetch_channel(int(channel_id))
        except discord.HTTPException as exc:
            log.warning("cannot resolve channel %s: %s", channel_id, exc)
            return None
        return place_of_channel(channel, guild_id)

    async def _deliver(self, message: discord.Message, outcome: Outcome) -> None:
        try:
            if outcome.kind == "reply":
                none = discord.AllowedMentions.none()
                await message.reply(one_message(outcome.text), mention_author=False, allowed_mentions=none)
            elif outcome.kind == "enqueued":
                await mark_received(self.client, self.intake, message, outcome)
        except discord.HTTPException as exc:
            log.warning("could not answer message %s: %s", message.id, exc)
