"""`/codebot repos | help | ask | refresh | status` as Discord application commands.

Discord wants an answer to an interaction within 3 s (docs/platform-notes.md §2b). Answers that need
no I/O (help, refusals) are sent at once; anything touching Redis is deferred first and
finished by editing the deferred response. Admin commands check CODEBOT_ADMINS
(`discord:<user id>`) and refuse non-admins with an ephemeral message (flags 64).

`ask` becomes a normal question: the deferred response is edited to show the question, and
that message is then treated exactly like a mention: 👀 on it, a thread started from it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import discord
from discord import app_commands
from redis import Redis

from bot import texts
from bot.discord.format import one_message, split_message
from bot.discord.handlers import Place, mark_received, place_of_channel
from bot.intake import REDIS_DOWN, Intake
from worker.jobs.admin import enqueue_refresh, is_admin, repos_listing, status_report
from worker.jobs.question import ReplyTarget, reference_id
from worker.jobs.runtime import Runtime
from worker.jobs.scope import resolve_scope

log = logging.getLogger("codebot.discord.commands")
NONE = discord.AllowedMentions.none()


class Commands:
    def __init__(self, intake: Intake, runtime: Runtime) -> None:
        self.intake = intake
        self.runtime = runtime
        self.settings = intake.settings

    # --- the tree ------------------------------------------------------------------------------
    def build_tree(self, client: discord.Client) -> app_commands.CommandTree[Any]:
        tree: app_commands.CommandTree[Any] = app_commands.CommandTree(client)
        group = app_commands.Group(
            name="codebot",
            description=texts.DISCORD_CMD_GROUP,
            allowed_contexts=app_commands.AppCommandContext(guild=True, dm_channel=True),
        )

        @group.command(name="ask", description=texts.DISCORD_CMD_ASK)
        @app_commands.describe(question=texts.DISCORD_CMD_ASK_QUESTION)
        async def ask(interaction: discord.Interaction, question: str) -> None:
            await self.ask(interaction, question)

        @group.command(name="repos", description=texts.DISCORD_CMD_REPOS)
        async def repos(interaction: discord.Interaction) -> None:
            await self.repos(interaction)

        @group.command(name="help", description=texts.DISCORD_CMD_HELP)
        async def help_(interaction: discord.Interaction) -> None:
            await interaction.response.send_message(texts.HELP, ephemeral=True, allowed_mentions=NONE)

        @group.command(name="refresh", description=texts.DISCORD_CMD_REFRESH)
        @app_commands.describe(name=texts.DISCORD_CMD_REFRESH_NAME)
        async def refresh(interaction: discord.Interaction, name: str) -> None:
            await self.refresh(interaction, name)

        @group.command(name="status", description=texts.DISCORD_CMD_STATUS)
        async def status(interaction: discord.Interaction) -> None:
            await self.status(interaction)

        guild = self.settings.discord_command_guild
        tree.add_command(group, guild=discord.Object(guild) if guild else None)
        tree.on_error = self.on_error  # type: ignore[method-assign]
        return tree

    async def on_error(self, interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
        ref = reference_id(str(interaction.id))
        log.error("command failed ref=%s", ref, exc_info=error)
        text = texts.DISCORD_COMMAND_FAILED.format(ref=ref)
        try:
            if interaction.response.is_done():
                await interaction.edit_original_response(content=text, allowed_mentions=NONE)
            else:
                await interaction.response.send_message(text, ephemeral=True, allowed_mentions=NONE)
        except discord.HTTPException:
            pass

    # --- commands ------------------------------------------------------------------------------
    def _place(self, interaction: discord.Interaction) -> Place:
        place = place_of_channel(interaction.channel, interaction.guild_id)
        if place is not None:
            return place
        channel = str(interaction.channel_id)  # a channel unknown to the cache: reply, no thread
        return Place(channel, None, str(interaction.guild_id), can_thread=False)

    async def ask(self, interaction: discord.Interaction, question: str) -> None:
        place = self._place(interaction)
        refusal = self.intake.quick_refusal(question, place.key, place.is_dm)
        if refusal:  # no I/O needed: a private answer at once
            await interaction.response.send_message(
                one_message(refusal), ephemeral=True, allowed_mentions=NONE
            )
            return
        await interaction.response.defer(thinking=True)
        echo = one_message(texts.DISCORD_ASK_ECHO.format(user=interaction.user.mention, question=question))
        shown = await interaction.edit_original_response(content=echo, allowed_mentions=NONE)
        ask = place.ask(str(interaction.user.id), question, str(shown.id), f"i{interaction.id}")
        outcome = await asyncio.to_thread(self.intake.submit, ask)
        if outcome.kind == "reply":
            await interaction.edit_original_response(content=one_message(f"{echo}\n\n{outcome.text}"))
        elif outcome.kind == "enqueued":
            try:
                await mark_received(interaction.client, self.intake, shown, outcome)
            except discord.HTTPException as exc:
                log.info("no 👀 on the ask message: %s", exc)

    async def repos(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        key = self._place(interaction).key
        text = await asyncio.to_thread(lambda: repos_listing(self._redis_or_none(), self.runtime, key))
        await self._finish(interaction, text)

    async def refresh(self, interaction: discord.Interaction, name: str) -> None:
        if not await self._admin(interaction, "refresh"):
            return
        wanted = name.strip().lower()
        if not wanted:
            await interaction.response.send_message(texts.REFRESH_USAGE, ephemeral=True)
            return
        names = self.intake.whitelist.names() if wanted == "all" else [wanted]
        refusal = None if wanted == "all" else resolve_scope(self.intake.whitelist, None, names).refusal
        if refusal:  # no such repo: the list, nearest name first
            await interaction.response.send_message(one_message(refusal), ephemeral=True)
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        notify = ReplyTarget(
            platform="discord",
            channel=str(interaction.channel_id),
            guild=str(interaction.guild_id) if interaction.guild_id else None,
            is_dm=interaction.guild_id is None,
            application_id=str(interaction.application_id),
            interaction_token=interaction.token,
        )
        try:
            await asyncio.to_thread(  # connecting may block too: off the event loop
                lambda: enqueue_refresh(self.intake.redis(), names, notify, str(interaction.user.id))
            )
        except REDIS_DOWN as exc:
            await self._finish(interaction, texts.queue_trouble(exc))
            return
        await self._finish(interaction, texts.REFRESH_QUEUED.format(names=", ".join(f"`{n}`" for n in names)))

    async def status(self, interaction: discord.Interaction) -> None:
        if not await self._admin(interaction, "status"):
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            text = await asyncio.to_thread(lambda: status_report(self.intake.redis(), self.runtime))
        except REDIS_DOWN as exc:
            text = texts.queue_trouble(exc)
        await self._finish(interaction, text)

    # --- helpers -------------------------------------------------------------------------------
    def _redis_or_none(self) -> Redis | None:
        try:
            return self.intake.redis()
        except REDIS_DOWN:
            return None

    async def _admin(self, interaction: discord.Interaction, command: str) -> bool:
        if is_admin(self.settings, f"discord:{interaction.user.id}"):
            return True
        await interaction.response.send_message(
            texts.NOT_ADMIN.format(command=command), ephemeral=True, allowed_mentions=NONE
        )
        return False

    async def _finish(self, interaction: discord.Interaction, markdown: str) -> None:
        """Edit the deferred (ephemeral) response; what does not fit goes in follow-ups."""
        chunks = split_message(markdown) or ["…"]
        await interaction.edit_original_response(content=chunks[0], allowed_mentions=NONE)
        for chunk in chunks[1:]:
            await interaction.followup.send(chunk, ephemeral=True, allowed_mentions=NONE)
