"""The Discord end-to-end rig: the fake Discord, the real adapter on its gateway, the real
worker path (embedded Redis, burst RQ worker, scripted model, a synced fixture repo).

The adapter runs on its own event loop in a thread, as `codebot discord` would run it; the
test thread injects gateway events, runs the burst worker (whose sink posts over REST) and
reads what the fake Discord recorded.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.discord.app import CodebotDiscord, build_client
from config.settings import Settings
from tests.support import discord_payloads as payloads
from tests.support.e2e import Rig, build_rig
from tests.support.fake_discord import FakeDiscord
from tests.support.model_server import text, tool_calls
from worker.jobs.question import Question, ReplyTarget, event_identity
from worker.jobs.queue import queue_depth
from worker.jobs.runtime import Runtime

READY_TIMEOUT_SECONDS = 10.0


class RunningBot:
    """The real adapter connected to the fake gateway, on a loop of its own."""

    def __init__(self, settings: Settings, runtime: Runtime) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="discord-adapter", daemon=True)
        self.thread.start()
        # discord.py waits this long for more guilds before on_ready (2 s by default)
        self.client: CodebotDiscord = build_client(settings, runtime, guild_ready_timeout=0.05)
        assert settings.discord_bot_token
        self.task = asyncio.run_coroutine_threadsafe(
            self.client.start(settings.discord_bot_token.get_secret_value()), self.loop
        )
        ready = asyncio.run_coroutine_threadsafe(self.client.wait_until_ready(), self.loop)
        try:
            ready.result(READY_TIMEOUT_SECONDS)
        except Exception:
            if self.task.done():
                self.task.result()  # the real reason the adapter did not start
            raise

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.client.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@dataclass
class DiscordRig:
    fake: FakeDiscord
    rig: Rig
    bot: RunningBot

    @property
    def settings(self) -> Settings:
        return self.rig.settings

    def mention(self, question: str, **kwargs: Any) -> dict[str, Any]:
        """A user's message mentioning the bot, as the gateway delivers it."""
        content = f"<@{self.fake.bot_id}> {question}"
        return self.fake.message_create(content, mentions=[self.fake.bot_user], **kwargs)

    def thread_from(self, starter: str) -> dict[str, Any]:
        """A thread someone started from their message `starter` in the guild channel."""
        fake = self.fake
        root = fake.message_create(starter, author=fake.admin)
        fake.channels[root["id"]] = payloads.thread(
            root["id"], fake.channel_id, fake.guild_id, fake.admin["id"], "x", 1440
        )
        fake.dispatch("THREAD_CREATE", {**fake.channels[root["id"]], "newly_created": True})
        return root

    def queued(self, count: int = 1) -> None:
        self.fake.wait_for(lambda: queue_depth(self.rig.redis) >= count)

    def acked(self, message: dict[str, Any]) -> None:
        """Wait for the adapter's 👀 on a message: it was enqueued."""
        self.fake.wait_for(lambda: ("PUT", "👀") in self.reactions(message["id"]))

    def work(self) -> None:
        self.rig.work()

    def script_answer(self, answer: str) -> None:
        self.rig.model.enqueue(
            tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py", "start_line": 1})),
            text(answer),
        )

    def reactions(self, message: str) -> list[tuple[str, str]]:
        return [(method, emoji) for method, _c, m, emoji in self.fake.reactions if m == message]


@contextmanager
def discord_rig(tmp: Path, fake: FakeDiscord | None = None, **overrides: Any) -> Iterator[DiscordRig]:
    """Everything up and connected; `fake` when the test needs its ids in the settings (the
    caller then closes it)."""
    own = fake is None
    fake = fake or FakeDiscord().start()
    options: dict[str, Any] = {
        "discord_bot_token": "test-token",
        "discord_api_url": fake.base_url,
        "admins": f"discord:{fake.admin['id']}",
        "progress_min_interval_seconds": 0.0,
    }
    options.update(overrides)
    try:
        with contextmanager(build_rig)(tmp, **options) as rig:  # the model server, embedded Redis
            bot = RunningBot(rig.settings, rig.runtime)
            try:
                fake.wait_for(lambda: bot.client.get_guild(int(fake.guild_id)))  # GUILD_CREATE handled
                yield DiscordRig(fake, rig, bot)
            finally:
                bot.close()
    finally:
        if own:
            fake.close()


def asked_question(drig: DiscordRig) -> tuple[dict[str, Any], Question]:
    """A user's message in the guild channel, and the question a worker would answer for it."""
    fake = drig.fake
    asked = fake.message_create("how does retry work?")
    target = ReplyTarget(
        platform="discord",
        channel=fake.channel_id,
        thread=asked["id"],
        message=asked["id"],
        guild=fake.guild_id,
    )
    question = Question(
        id=event_identity("discord", asked["id"]), asker="1", target=target, text="how?", repos=["payments"]
    )
    return asked, question
