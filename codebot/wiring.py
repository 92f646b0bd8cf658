"""The composition root: the only place that knows both the core and the chat adapters.

The core (worker/, config/) never imports bot/. A worker answers on Slack and Discord because
this module registers each platform's ReplySink factory and admin notifier in the Runtime's
typed registries (worker.jobs.runtime.Runtime.sinks / .notifiers). To add a platform: write
its sink, notifier and thread reader in bot/ and add one line to each table below.
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.discord import admin_notice as discord_admin_notice
from bot.discord import reply_chain as discord_reply_chain
from bot.discord import sink as discord_sink
from bot.discord import thread_reader as discord_thread_reader
from bot.slack import sink as slack_sink
from bot.slack import stream as slack_stream
from bot.slack import thread_reader as slack_thread_reader
from config.settings import Settings
from worker.conversation.chain import ReplyChainReader
from worker.conversation.thread import ThreadReader
from worker.jobs import runtime as runtime_module
from worker.jobs.question import Platform
from worker.jobs.runtime import Runtime
from worker.jobs.sink import Notifier, SinkFactory

SINKS: Mapping[Platform, SinkFactory] = {
    "slack": slack_stream.SlackStreamSink,  # streams where it can, else slack_sink.SlackSink's way
    "discord": discord_sink.DiscordSink,
}
NOTIFIERS: Mapping[Platform, Notifier] = {
    "slack": slack_sink.notify_admin,
    "discord": discord_admin_notice.notify_admin,
}
THREAD_READERS: Mapping[Platform, ThreadReader] = {
    "slack": slack_thread_reader.read_thread,
    "discord": discord_thread_reader.read_thread,
}
REPLY_CHAIN_READERS: Mapping[Platform, ReplyChainReader] = {
    "discord": discord_reply_chain.read_reply_chain,  # Slack has threads, not reply chains
}


def build_runtime(settings: Settings) -> Runtime:
    """A Runtime that can answer on every platform: what `codebot worker` runs jobs with."""
    return runtime_module.build_runtime(
        settings,
        sinks=SINKS,
        notifiers=NOTIFIERS,
        threads=THREAD_READERS,
        reply_chains=REPLY_CHAIN_READERS,
    )
