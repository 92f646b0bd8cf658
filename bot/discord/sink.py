"""The worker's side of Discord: reactions, the answer thread, progress and the answer, over REST.

No gateway connection: one `GET /users/@me` to log in, then only the calls below. The sink
owns a private event loop for the job's lifetime so the HTTP session (and discord.py's rate
limit buckets) last across the job's calls; it is closed after the answer or the failure.

Where a reply goes (ReplyTarget, as the adapter builds it):
- `thread == message` in a guild: a new question in a text channel. A public thread is
  started from the question message; Discord gives the thread the message's id.
- `thread` set and different: a follow-up or a mention inside an existing thread: answer there.
- no `thread` (DMs, channels without threads): a reply referencing the question message.
- no `message` but an interaction token (an admin command's notice): an ephemeral follow-up
  to the command, or a plain channel message once the 15-minute token has expired.

Every message the sink posts for a question is recorded in Redis under the question id
(`codebot:discord:messages:<id>`: the progress message, which the first part of the answer
replaces, and the answer's further parts) as soon as Discord returns it, so a retried job, the
failure callback or the outbox delivering a stored answer hours later (a new sink, maybe on
another machine) edits those messages instead of posting again. Each post also carries a nonce
derived from the question id and its slot, so a post retried within Discord's few minutes gets
the earlier message back. The final message counts as delivered only with its reactions: a
transient failure of one (5xx, a rate limit longer than discord.py waits, no connection) fails
the delivery, which the outbox completes later (worker/jobs/sink.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

import aiohttp
from discord.errors import HTTPException, NotFound, RateLimited
from redis import Redis
from redis.exceptions import RedisError

from bot import texts
from bot.discord.feedback import feedback_buttons
from bot.discord.format import message_nonce, one_message, render_answer, thread_name
from bot.discord.live import DiscordLiveView
from bot.discord.rest import THREAD_ALREADY_EXISTS, DiscordRest, use_api_base
from config.errors import ConfigError
from config.settings import Settings
from worker.agent.live_text import LiveText
from worker.jobs.live import LiveView
from worker.jobs.question import Question
from worker.jobs.sink import Answer, DeliveryFailed

log = logging.getLogger("codebot.discord.sink")

EYES, DONE, WARNING = "👀", "✅", "⚠️"
# Failures a cosmetic step survives: Discord said no, could not be reached, or asked for a longer
# wait than CODEBOT_DISCORD_MAX_RATELIMIT_WAIT_SECONDS (RateLimited is not an HTTPException).
TRANSIENT = (HTTPException, RateLimited, aiohttp.ClientError, asyncio.TimeoutError, OSError)
UNKNOWN_CHANNEL = 10003  # Discord error code: the channel (or thread) is gone
MESSAGES_KEY_PREFIX = "codebot:discord:messages:"  # + question id -> hash: slot -> message id
PROGRESS_SLOT = "p"  # the progress message; the answer's first part replaces it
DESTINATION_SLOT = "d"  # the channel or thread the question's messages went to
# Records outlive the outbox's last attempt (delivery_give_up_seconds) by this much.
RECORD_MARGIN_SECONDS = 24 * 3600
T = TypeVar("T")
Components = list[dict[str, Any]]


def is_transient(exc: BaseException) -> bool:
    """Discord out of reach, failing or limiting us: trying again later will work."""
    if isinstance(exc, HTTPException):
        return exc.status >= 500 or exc.status == 429
    return isinstance(exc, TRANSIENT)


def delivery_failed(what: str, exc: BaseException) -> DeliveryFailed:
    """The DeliveryFailed for a Discord failure: retried by the outbox unless the channel is gone."""
    gone = isinstance(exc, NotFound) and exc.code == UNKNOWN_CHANNEL
    wait = exc.retry_after if isinstance(exc, RateLimited) else None
    return DeliveryFailed(
        f"Discord did not take the {what}: {exc!r}", retryable=not gone, retry_after_seconds=wait
    )


def _shutdown(loop: asyncio.AbstractEventLoop, rest: DiscordRest) -> None:
    if not loop.is_closed():
        loop.run_until_complete(rest.close())
        loop.close()


class DiscordSink:
    """worker.jobs.sink.ReplySink for Discord (the contract is documented there)."""

    def __init__(self, settings: Settings, redis: Redis, question: Question) -> None:
        if not settings.discord_bot_token:
            raise ConfigError("DISCORD_BOT_TOKEN: not set — the worker needs it to answer Discord questions")
        use_api_base(settings.discord_api_url)
        self.settings = settings
        self.redis = redis
        self.question = question
        self.target = question.target
        self._rest = DiscordRest(
            settings.discord_bot_token.get_secret_value(), settings.discord_max_ratelimit_wait_seconds
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._destination: str | None = None  # the channel (or thread) replies go to
        self._reference: tuple[str, str] | None = None  # (channel, message) the first reply quotes
        self._progress_id: str | None = None
        self._last_progress = float("-inf")
        self._messages_key = MESSAGES_KEY_PREFIX + question.id
        self._record_seconds = int(settings.delivery_give_up_seconds) + RECORD_MARGIN_SECONDS
        self._view: DiscordLiveView | None = None

    # --- ReplySink ---------------------------------------------------------------------------
    def received(self) -> None:
        try:
            self._run(self._received())
        except TRANSIENT as exc:  # the answer matters more: it tries again to find its way
            log.warning("could not mark question=%s as received: %s", self.question.id, exc)

    def show_waiting(self, text: str) -> None:
        """The progress message of a question still in the queue says so (bot/queue_notices.py);
        the worker's received() later edits the same message. Raises for a Discord failure."""
        if self._notice_only:
            return
        try:
            self._run(self._show(one_message(text)))
        finally:
            self.close()

    def progress(self, text: str) -> None:
        now = time.monotonic()
        if now - self._last_progress < self.settings.progress_min_interval_seconds:
            return
        self._last_progress = now
        try:
            self._run(self._show_progress(one_message(texts.PROGRESS.format(step=text))))
        except TRANSIENT as exc:  # progress is cosmetic: never fail the question for it
            log.warning("progress update failed question=%s: %s", self.question.id, exc)

    def live(self, text: LiveText) -> LiveView | None:
        """The progress message edited as the answer grows (bot/discord/live.py)."""
        if not self.settings.discord_live_edits or self._notice_only:
            return None
        try:
            self._run(self._ensure_progress())
        except TRANSIENT as exc:
            log.warning("no live view for question=%s: %s", self.question.id, exc)
            return None
        assert self._destination is not None and self._progress_id is not None
        self._view = DiscordLiveView(self.settings, self._destination, self._progress_id, text)
        return self._view

    def answer(self, answer: Answer) -> None:
        if self._view is not None:
            self._view.close()  # nothing more is shown: the answer replaces it
        try:
            self._run(self._answer(answer))
        except TRANSIENT as exc:
            raise delivery_failed("answer", exc) from exc
        finally:
            self.close()

    def failed(self, message: str) -> None:
        if self._view is not None:
            self._view.close()
        try:
            self._run(self._failed(one_message(message)))
        except TRANSIENT as exc:
            raise delivery_failed("apology", exc) from exc
        finally:
            self.close()

    def close(self) -> None:
        if self._loop is not None:
            _shutdown(self._loop, self._rest)
            self._loop = None

    # --- plumbing ----------------------------------------------------------------------------
    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            weakref.finalize(self, _shutdown, self._loop, self._rest)
        return self._loop.run_until_complete(self._logged_in(coro))

    async def _logged_in(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            await self._rest.open()
        except BaseException:
            coro.close()
            raise
        return await coro

    @property
    def _message_channel(self) -> str:
        """The channel the asker's message is in (a thread for follow-ups)."""
        t = self.target
        return t.thread if t.thread and t.thread != t.message else t.channel

    @property
    def _notice_only(self) -> bool:
        t = self.target
        return t.message is None and bool(t.interaction_token and t.application_id)

    async def _mark(self, emoji: str, remove: str | None = None) -> None:
        """React to the asker's message. Discord failing for a while raises (the final
        message's delivery is then tried again); a refusal that would never change (the message
        deleted, no permission) is logged."""
        if self.target.message is None:
            return
        try:
            await self._rest.react(self._message_channel, self.target.message, emoji)
            if remove:
                await self._rest.unreact(self._message_channel, self.target.message, remove)
        except (HTTPException, RateLimited) as exc:
            if is_transient(exc):
                raise
            log.info("reaction %s failed question=%s: %s", emoji, self.question.id, exc)

    # --- what was posted, kept across attempts -------------------------------------------------
    def _recorded(self) -> dict[str, str]:
        try:
            raw = self.redis.hgetall(self._messages_key)
        except RedisError:
            return {}
        return {k.decode(): v.decode() for k, v in raw.items()}

    def _record(self, slot: str, message_id: str) -> None:
        try:
            pipe = self.redis.pipeline()
            pipe.hset(self._messages_key, slot, message_id)
            pipe.expire(self._messages_key, self._record_seconds)
            pipe.execute()
        except RedisError:
            log.warning("could not record message %s of question=%s", slot, self.question.id)

    async def _ensure_destination(self) -> str:
        if self._destination is not None:
            return self._destination
        t = self.target
        recorded = self._recorded().get(DESTINATION_SLOT)
        if recorded is not None:  # where an earlier attempt posted: the rest goes there too
            self._destination = recorded
        elif t.is_dm or not t.thread or t.message is None:
            self._destination = t.channel
            self._reference = (t.channel, t.message) if t.message else None
        elif t.thread != t.message:
            self._destination = t.thread
        else:
            self._destination = await self._open_thread()
        return self._destination

    async def _open_thread(self) -> str:
        t = self.target
        assert t.message is not None and t.thread is not None
        try:
            name = thread_name(self.question.text)
            minutes = self.settings.discord_thread_archive_minutes
            await self._rest.create_thread(t.channel, t.message, name, minutes)
        except HTTPException as exc:
            if is_transient(exc):  # Discord failing for a while: try again later, not elsewhere
                raise
            if exc.code != THREAD_ALREADY_EXISTS:  # e.g. no Create Public Threads permission
                log.warning("no thread for question=%s (%s); replying in the channel", self.question.id, exc)
                self._reference = (t.channel, t.message)
                return t.channel
        return t.thread

    async def _post(
        self,
        content: str,
        slot: str,
        embed: dict[str, Any] | None = None,
        components: Components | None = None,
    ) -> str:
        return str((await self._post_message(content, slot, embed, components))["id"])

    async def _post_message(
        self,
        content: str,
        slot: str,
        embed: dict[str, Any] | None = None,
        components: Components | None = None,
    ) -> dict[str, Any]:
        destination = await self._ensure_destination()
        reference, self._reference = self._reference, None  # only the first reply quotes the question
        message = await self._rest.post(
            destination,
            content,
            message_nonce(self.question.id, slot),
            reference=reference,
            embed=embed,
            components=components,
        )
        self._record(DESTINATION_SLOT, destination)
        return message

    async def _ensure_progress(self) -> None:
        """The progress message exists (posted by received(), or now), and where it is."""
        if self._progress_id is None:
            self._progress_id = self._recorded().get(PROGRESS_SLOT)
        if self._progress_id is None:
            await self._show(texts.QUEUED)
        await self._ensure_destination()

    async def _show(
        self, content: str, embed: dict[str, Any] | None = None, components: Components | None = None
    ) -> None:
        """`content` in the progress message: the one recorded for the question (an earlier run,
        the failure callback, an earlier delivery attempt) is edited; without one it is posted
        and recorded. A post that Discord answers with an earlier message of the same nonce
        (unchanged) is edited too; a recorded message someone deleted is posted again."""
        if self._progress_id is None:
            self._progress_id = self._recorded().get(PROGRESS_SLOT)
        destination = await self._ensure_destination()
        if self._progress_id is not None:
            try:
                await self._rest.edit(destination, self._progress_id, content, embed, components)
                return
            except NotFound:
                self._progress_id = None
                slot = "p-again"
        else:
            slot = PROGRESS_SLOT
        message = await self._post_message(content, slot, embed, components)
        self._progress_id = str(message["id"])
        self._record(PROGRESS_SLOT, self._progress_id)
        if message.get("content") != content:
            await self._rest.edit(destination, self._progress_id, content, embed, components)

    # --- the steps ---------------------------------------------------------------------------
    async def _received(self) -> None:
        if self._notice_only:
            return
        await self._mark(EYES)
        await self._show(texts.QUEUED)

    async def _show_progress(self, content: str) -> None:
        if self._notice_only:
            return
        await self._show(content)

    async def _answer(self, answer: Answer) -> None:
        rendered = render_answer(answer)
        if self._notice_only and await self._notice("\n\n".join(rendered.chunks)):
            return
        last = len(rendered.chunks) - 1
        recorded = self._recorded()
        for index, chunk in enumerate(rendered.chunks):
            embed = rendered.embed if index == last else None
            buttons = feedback_buttons(self.question.id) if index == last else []
            if index == 0:
                await self._show(chunk, embed, buttons)  # the progress message becomes the answer
            else:
                await self._show_part(f"a{index}", recorded.get(f"a{index}"), chunk, embed, buttons)
        await self._mark(WARNING if answer.cut_off else DONE, remove=EYES)  # ✅ only for a whole answer

    async def _show_part(
        self,
        slot: str,
        recorded: str | None,
        content: str,
        embed: dict[str, Any] | None,
        components: Components | None = None,
    ) -> None:
        """A further part of the answer: its recorded message edited, or posted and recorded."""
        if recorded is not None:
            try:
                await self._rest.edit(await self._ensure_destination(), recorded, content, embed, components)
                return
            except NotFound:
                slot += "-again"
        message_id = await self._post(content, slot, embed, components)
        self._record(slot.removesuffix("-again"), message_id)

    async def _failed(self, message: str) -> None:
        if self._notice_only and await self._notice(message):
            return
        await self._show(message, components=[])  # replaces the progress, also one an earlier run posted
        await self._mark(WARNING, remove=EYES)

    async def _notice(self, content: str) -> bool:
        """An ephemeral follow-up to the command; False when its token has expired."""
        t = self.target
        assert t.application_id is not None and t.interaction_token is not None
        try:
            await self._rest.followup(t.application_id, t.interaction_token, one_message(content), True)
            return True
        except HTTPException as exc:
            log.info("command follow-up failed question=%s (%s); posting instead", self.question.id, exc)
            return False
