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

Every message has a nonce derived from the question id and its slot (progress, answer part
N), so a retried job gets Discord's earlier message back instead of a duplicate; the progress
message it gets back is then edited, so "trying again" and a failure replace it as they would
in the run that posted it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

import aiohttp
from discord.errors import HTTPException, RateLimited
from redis import Redis

from bot import texts
from bot.discord_format import message_nonce, one_message, render_answer, split_message, thread_name
from bot.discord_rest import THREAD_ALREADY_EXISTS, DiscordRest, use_api_base
from config.errors import ConfigError
from config.settings import Settings
from worker.jobs.question import Question, ReplyTarget
from worker.jobs.sink import Answer, DeliveryFailed

log = logging.getLogger("codebot.discord.sink")

EYES, DONE, WARNING = "👀", "✅", "⚠️"
# Failures a cosmetic step survives: Discord said no, could not be reached, or asked for a longer
# wait than CODEBOT_DISCORD_MAX_RATELIMIT_WAIT_SECONDS (RateLimited is not an HTTPException).
TRANSIENT = (HTTPException, RateLimited, aiohttp.ClientError, asyncio.TimeoutError, OSError)
T = TypeVar("T")


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

    # --- ReplySink ---------------------------------------------------------------------------
    def received(self) -> None:
        try:
            self._run(self._received())
        except TRANSIENT as exc:  # the answer matters more: it tries again to find its way
            log.warning("could not mark question=%s as received: %s", self.question.id, exc)

    def progress(self, text: str) -> None:
        now = time.monotonic()
        if now - self._last_progress < self.settings.progress_min_interval_seconds:
            return
        self._last_progress = now
        try:
            self._run(self._show_progress(one_message(texts.PROGRESS.format(step=text))))
        except TRANSIENT as exc:  # progress is cosmetic: never fail the question for it
            log.warning("progress update failed question=%s: %s", self.question.id, exc)

    def answer(self, answer: Answer) -> None:
        try:
            self._run(self._answer(answer))
        except TRANSIENT as exc:
            raise DeliveryFailed(f"Discord did not take the answer: {exc!r}") from exc
        finally:
            self.close()

    def failed(self, message: str) -> None:
        try:
            self._run(self._failed(one_message(message)))
        except TRANSIENT as exc:
            raise DeliveryFailed(f"Discord did not take the apology: {exc!r}") from exc
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
        if self.target.message is None:
            return
        try:
            await self._rest.react(self._message_channel, self.target.message, emoji)
            if remove:
                await self._rest.unreact(self._message_channel, self.target.message, remove)
        except (HTTPException, RateLimited) as exc:  # the message may be gone; reactions are best effort
            log.info("reaction %s failed question=%s: %s", emoji, self.question.id, exc)

    async def _ensure_destination(self) -> str:
        if self._destination is not None:
            return self._destination
        t = self.target
        if t.is_dm or not t.thread or t.message is None:
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
            if exc.code != THREAD_ALREADY_EXISTS:  # e.g. no Create Public Threads permission
                log.warning("no thread for question=%s (%s); replying in the channel", self.question.id, exc)
                self._reference = (t.channel, t.message)
                return t.channel
        return t.thread

    async def _post(self, content: str, slot: str, embed: dict[str, Any] | None = None) -> str:
        return str((await self._post_message(content, slot, embed))["id"])

    async def _post_message(
        self, content: str, slot: str, embed: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        destination = await self._ensure_destination()
        reference, self._reference = self._reference, None  # only the first reply quotes the question
        return await self._rest.post(
            destination, content, message_nonce(self.question.id, slot), reference=reference, embed=embed
        )

    async def _show(self, content: str) -> None:
        """`content` in the progress message. A sink that has none yet posts it under the progress
        nonce; when an earlier run of the question posted one (a retried job, the failure
        callback), Discord hands that message back unchanged, so it is edited."""
        if self._progress_id is None:
            message = await self._post_message(content, "p")
            self._progress_id = str(message["id"])
            if message.get("content") == content:
                return
        await self._rest.edit(await self._ensure_destination(), self._progress_id, content)

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
        for index, chunk in enumerate(rendered.chunks):
            embed = rendered.embed if index == last else None
            if index == 0 and self._progress_id is not None:
                await self._rest.edit(await self._ensure_destination(), self._progress_id, chunk, embed)
            else:
                await self._post(chunk, f"a{index}", embed)
        await self._mark(DONE, remove=EYES)

    async def _failed(self, message: str) -> None:
        if self._notice_only and await self._notice(message):
            return
        await self._show(message)  # replaces the progress, also one an earlier run posted
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


def notify_admin(settings: Settings, target: ReplyTarget, user: str, markdown: str) -> None:
    """worker.jobs.admin's notifier: tell an admin privately how their command went. An ephemeral
    follow-up to the command while its 15-minute token lives, else a direct message."""
    if not settings.discord_bot_token:
        log.warning("admin notice not sent (DISCORD_BOT_TOKEN unset): %s", markdown)
        return
    use_api_base(settings.discord_api_url)
    asyncio.run(_notify(settings, target, user, markdown))


async def _notify(settings: Settings, target: ReplyTarget, user: str, markdown: str) -> None:
    assert settings.discord_bot_token is not None
    rest = DiscordRest(
        settings.discord_bot_token.get_secret_value(), settings.discord_max_ratelimit_wait_seconds
    )
    chunks = split_message(markdown) or ["…"]
    try:
        await rest.open()
        if target.application_id and target.interaction_token:
            try:
                for chunk in chunks:
                    await rest.followup(target.application_id, target.interaction_token, chunk, True)
                return
            except HTTPException as exc:
                log.info("admin follow-up failed (%s); sending a direct message", exc)
        channel = await rest.dm_channel(user)
        notice_id = f"{target.interaction_token}{markdown}"
        for index, chunk in enumerate(chunks):
            await rest.send(channel, chunk, message_nonce(notice_id, f"n{index}"))
    finally:
        await rest.close()
