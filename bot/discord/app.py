"""`codebot discord`: the gateway client. It only decides and enqueues; workers answer.

Intents: guilds (channels and threads in the cache), guild messages and DM messages (the
triggers), and the privileged Message Content intent so a follow-up in the bot's thread
needs no mention (CODEBOT_DISCORD_MESSAGE_CONTENT_INTENT=false drops it; follow-ups then
need a mention, since Discord sends the text of mentions and DMs anyway).

DISCORD_API_URL is honoured for REST (discord.py's Route.BASE) and for the gateway: a plain
Client dials the public gateway, so setup_hook asks `GET /gateway/bot` at that base and
points DiscordWebSocket.DEFAULT_GATEWAY at the answer (docs/platform-notes.md §2h).

Application commands are synced once per process start in setup_hook, never in on_ready
(which fires again on every reconnect), to CODEBOT_DISCORD_COMMAND_GUILD when set (instant,
for development) or globally.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import aiohttp
import discord
import yarl
from discord import app_commands
from discord.gateway import DiscordWebSocket

from bot.discord.commands import Commands
from bot.discord.feedback import FeedbackInteractions
from bot.discord.handlers import MessageHandler, RedisHolder
from bot.discord.rest import use_api_base
from bot.discord.sink import DiscordSink
from bot.intake import REDIS_DOWN, Intake
from bot.queue_notices import QueueNotices
from config.errors import ConfigError
from config.settings import Settings
from worker.jobs.question import Question
from worker.jobs.runtime import Runtime, build_runtime

log = logging.getLogger("codebot.discord")

# What the bot needs in a channel: see it, read the question's history (replies, reactions),
# react (👀 ✅ ⚠️), start a thread from the question and post in it, and show the Sources embed.
BOT_PERMISSIONS = discord.Permissions(
    view_channel=True,
    read_message_history=True,
    add_reactions=True,
    send_messages=True,
    create_public_threads=True,
    send_messages_in_threads=True,
    embed_links=True,
)


def invite_url(application_id: int | str) -> str:
    """The OAuth2 URL that adds the bot with its permissions and the slash-command scope."""
    return (
        f"https://discord.com/oauth2/authorize?client_id={application_id}"
        f"&scope=bot+applications.commands&permissions={BOT_PERMISSIONS.value}"
    )


def intents_for(settings: Settings) -> discord.Intents:
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.dm_messages = True
    intents.message_content = settings.discord_message_content_intent
    return intents


class CodebotDiscord(discord.Client):
    def __init__(self, settings: Settings, runtime: Runtime, **options: Any) -> None:
        # No message cache: an edit arriving before on_message runs would otherwise rewrite the
        # very Message object on_message is about to read (and the adapter never looks one up).
        super().__init__(
            intents=intents_for(settings),
            allowed_mentions=discord.AllowedMentions.none(),
            max_messages=None,
            **options,
        )
        self.settings = settings
        self.redis = RedisHolder(settings)
        self.intake = Intake(settings, runtime.whitelist, self.redis.get)
        self.handler = MessageHandler(self, self.intake, settings)
        self.commands = Commands(self.intake, runtime)
        self.feedback = FeedbackInteractions(settings, self.redis.get)
        self.tree: app_commands.CommandTree[Any] = self.commands.build_tree(self)
        self.synced: list[app_commands.AppCommand] = []
        self.queue_notices = QueueNotices(settings, self.redis.get, "discord", self._show_waiting)
        self._stop_notices: threading.Event | None = None

    def _show_waiting(self, question: Question, text: str) -> None:
        DiscordSink(self.settings, self.redis.get(), question).show_waiting(text)

    async def close(self) -> None:
        if self._stop_notices is not None:
            self._stop_notices.set()
        await super().close()

    async def setup_hook(self) -> None:
        self._stop_notices = self.queue_notices.start()  # waiting questions say so (bot/queue_notices.py)
        _shards, url, _limits = await self.http.get_bot_gateway()
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)
        if self.settings.discord_sync_commands:
            await self.sync_commands()

    async def sync_commands(self) -> None:
        guild_id = self.settings.discord_command_guild
        guild = discord.Object(guild_id) if guild_id else None
        try:
            self.synced = await self.tree.sync(guild=guild)
        except discord.Forbidden:
            log.error(
                "could not register /codebot in guild %s: invite the bot with the applications.commands "
                "scope (see docs/discord.md)",
                guild_id,
            )
            return
        where = f"to guild {guild_id}" if guild else "globally"
        log.info("synced %d application command(s) %s", len(self.synced), where)

    async def on_ready(self) -> None:
        log.info("connected to Discord as %s; invite: %s", self.user, invite_url(self.application_id or "?"))

    async def on_message(self, message: discord.Message) -> None:
        await self.handler.on_message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """Clicks on the 👍/👎 under answers and the 👎 reason modal; commands are the tree's."""
        await self.feedback.on_interaction(interaction)


def build_client(settings: Settings, runtime: Runtime | None = None, **options: Any) -> CodebotDiscord:
    """The adapter, ready to `start(token)`; REST and gateway follow DISCORD_API_URL.
    `options` go to discord.Client (e.g. guild_ready_timeout)."""
    if not settings.discord_bot_token:
        raise ConfigError(
            "DISCORD_BOT_TOKEN: not set — create a bot in the Developer Portal (docs/discord.md)"
        )
    use_api_base(settings.discord_api_url)
    client = CodebotDiscord(settings, runtime or build_runtime(settings), **options)
    client.redis.start()
    return client


def serve_metrics_if_possible(client: CodebotDiscord, port: int, host: str = "127.0.0.1") -> None:
    from worker.jobs.queue import queue_depth
    from worker.ops.metrics import serve_metrics

    try:
        serve_metrics(client.redis.get(), port, queue_depth, host=host)
    except REDIS_DOWN as exc:
        log.warning("/metrics not served: Redis is unreachable at start (%s)", exc)


class _NoVoiceNotice(logging.Filter):
    """discord.py warns at start that voice libraries are missing; codebot never uses voice."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "voice will NOT be supported" not in record.getMessage()


def serve(settings: Settings) -> int:
    logging.getLogger("discord.client").addFilter(_NoVoiceNotice())
    client = build_client(settings)
    assert settings.discord_bot_token is not None
    if settings.metrics_port is not None:
        serve_metrics_if_possible(client, settings.metrics_port, settings.metrics_host)
    try:
        client.run(settings.discord_bot_token.get_secret_value(), log_handler=None)
    except discord.LoginFailure:
        raise ConfigError("DISCORD_BOT_TOKEN: Discord refused the token — reset it on the Bot page") from None
    except (aiohttp.ClientError, OSError) as exc:
        raise ConfigError(
            f"DISCORD_API_URL: cannot reach Discord at {settings.discord_api_url} ({type(exc).__name__}) — "
            "check the network or the URL"
        ) from None
    except discord.PrivilegedIntentsRequired:
        raise ConfigError(
            "CODEBOT_DISCORD_MESSAGE_CONTENT_INTENT: Discord refused the Message Content intent — enable it "
            "under Bot → Privileged Gateway Intents, or set this to false (follow-ups then need a mention)"
        ) from None
    return 0
