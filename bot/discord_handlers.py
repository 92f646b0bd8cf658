"""What the Discord adapter does with a message (or `/codebot ask`): decide, check, enqueue.

Triggers (PLATFORM_NOTES §2a, pitfalls 7 and 12):
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

Every blocking Redis call runs in a worker thread (`asyncio.to_thread`) so a slow or dead
Redis never stalls the gateway heartbeat. Redis down: the asker is told, nothing is lost
on our side, and the next message tries again (redis-py reconnects by itself).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Literal

import discord
import redis as redis_lib
from redis import Redis

from bot import texts
from bot.discord_format import one_message, strip_mentions_of
from config.repos import Whitelist
from config.settings import Settings
from worker.jobs.limits import check_rate, queue_full
from worker.jobs.question import Question, ReplyTarget, event_identity
from worker.jobs.queue import QUESTION_RESULT_TTL_SECONDS, enqueue_question
from worker.jobs.scope import Scope, extract_repo_filter, resolve_scope
from worker.jobs.threads import THREAD_TTL_SECONDS, load_turns
from worker.ops.accounting import BUDGET_SPENT_MESSAGE, budget_spent
from worker.ops.redis_connection import RedisUnavailable, connect

log = logging.getLogger("codebot.discord")

SEEN_KEY_PREFIX = "codebot:discord:seen:"  # one reply per Discord message, whatever it is
# thread id -> hash: `parent` (channel id; only for threads the bot opened: follow-ups) and
# `repos` (the `repo:` names its first question asked for, kept by follow-ups that name none)
THREAD_META_PREFIX = "codebot:discord:thread:"
# Any failure of Redis, not only a lost connection: a server that refuses writes (OOM, MISCONF, a
# read-only replica after a failover) must get the asker the same "try again" as a dead one.
REDIS_DOWN = (redis_lib.RedisError, RedisUnavailable, OSError)
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


@dataclass(frozen=True)
class Outcome:
    kind: Literal["enqueued", "duplicate", "reply"]
    text: str = ""
    question: Question | None = None


class Intake:
    """Blocking checks and the enqueue, shared by mentions, DMs, follow-ups and `/codebot ask`."""

    def __init__(self, settings: Settings, whitelist: Whitelist, redis: RedisHolder) -> None:
        self.settings = settings
        self.whitelist = whitelist
        self.redis = redis

    def precheck(
        self, text: str, place: Place, kept: list[str] | None = None
    ) -> tuple[str, list[str], Scope]:
        """(question text, repos asked for, scope) without Redis; Scope.refusal says why not.
        `kept`: the repos of the thread's first question, used when this one names none."""
        cleaned, requested = extract_repo_filter(text)
        if not cleaned:
            return "", requested, Scope([], texts.HELP_IN_DM if place.is_dm else texts.EMPTY_MENTION)
        return cleaned, requested, resolve_scope(self.whitelist, place.key, requested or kept or [])

    def is_follow_up(self, thread: str) -> str | None:
        """The parent channel of a thread the bot opened, else None."""
        raw = self.redis.get().hget(THREAD_META_PREFIX + thread, "parent")
        return raw.decode() if isinstance(raw, bytes) else raw

    def submit(self, asker: str, place: Place, text: str, message: str, identity: str) -> Outcome:
        """One question per Discord message: dedupe, scope, limits, history, enqueue."""
        try:
            return self._submit(asker, place, text, message, identity)
        except REDIS_DOWN as exc:
            log.warning("Redis unavailable, question %s refused: %s", identity, exc)
            return Outcome("reply", texts.queue_trouble(exc))

    def _submit(self, asker: str, place: Place, text: str, message: str, identity: str) -> Outcome:
        redis = self.redis.get()
        job_id = event_identity("discord", identity)
        if not redis.set(SEEN_KEY_PREFIX + job_id, "1", nx=True, ex=QUESTION_RESULT_TTL_SECONDS):
            return Outcome("duplicate")
        kept = self._kept_repos(redis, place.thread) if place.thread else []
        cleaned, requested, scope = self.precheck(text, place, kept)
        if scope.refusal:
            return Outcome("reply", scope.refusal)
        if budget_spent(redis, self.settings):
            return Outcome("reply", BUDGET_SPENT_MESSAGE)
        depth = queue_full(redis, self.settings)
        if depth is not None:
            return Outcome("reply", texts.QUEUE_FULL.format(depth=depth))
        wait = check_rate(redis, f"discord:{asker}", self.settings)
        if wait is not None:
            return Outcome("reply", texts.RATE_LIMITED.format(seconds=wait))
        thread = place.thread or (message if place.can_thread else None)
        history = load_turns(redis, "discord", place.channel, place.thread) if place.thread else []
        question = Question(
            id=job_id,
            asker=asker,
            target=ReplyTarget(
                platform="discord",
                channel=place.channel,
                thread=thread,
                message=message,
                guild=place.guild,
                is_dm=place.is_dm,
            ),
            text=cleaned,
            repos=scope.repos,
            history=history,
        )
        if thread is not None:
            self._remember_thread(redis, thread, place.channel if thread == message else None, requested)
        enqueued = enqueue_question(redis, question, self.settings)
        return Outcome("duplicate" if enqueued.duplicate else "enqueued", question=question)

    @staticmethod
    def _kept_repos(redis: Redis, thread: str) -> list[str]:
        raw = redis.hget(THREAD_META_PREFIX + thread, "repos")
        text = raw.decode() if isinstance(raw, bytes) else (raw or "")
        return [name for name in text.split(",") if name]

    @staticmethod
    def _remember_thread(redis: Redis, thread: str, opened_in: str | None, requested: list[str]) -> None:
        """Before the job runs, so a follow-up is recognised even before the first answer."""
        key = THREAD_META_PREFIX + thread
        pipe = redis.pipeline()
        if opened_in is not None:  # the worker starts this thread from the question message
            pipe.hset(key, "parent", opened_in)
        if requested:  # the latest `repo:` named in the thread holds for the next follow-ups
            pipe.hset(key, "repos", ",".join(requested))
        pipe.expire(key, THREAD_TTL_SECONDS)
        pipe.execute()


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
                if await asyncio.to_thread(self.intake.is_follow_up, place.thread) is None:
                    return
            except REDIS_DOWN:
                return  # cannot tell whether this thread is ours: stay quiet rather than spam
        text = strip_mentions_of(message.content, me.id)
        if not (text or mentioned or place.is_dm):
            return  # a follow-up with nothing to ask (an image, a sticker): not a question
        outcome = await asyncio.to_thread(
            self.intake.submit, str(message.author.id), place, text, str(message.id), str(message.id)
        )
        await self._deliver(message, outcome)

    async def _place(self, message: discord.Message, mentioned: bool) -> Place | None:
        guild_id = guild_of(message)
        place = place_of_channel(message.channel, guild_id)
        if place is not None or guild_id is None:
            return place
        channel_id = str(message.channel.id)
        try:
            parent = await asyncio.to_thread(self.intake.is_follow_up, channel_id)
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
                await message.add_reaction("👀")  # received at once; the worker does the rest
        except discord.HTTPException as exc:
            log.warning("could not answer message %s: %s", message.id, exc)
