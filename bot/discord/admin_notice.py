"""Discord notices to an admin about their command (`/codebot refresh`), sent by the worker over
REST: worker.jobs.admin's notifier for Discord (codebot/wiring.py)."""

from __future__ import annotations

import asyncio
import logging

from discord.errors import HTTPException

from bot.discord.format import message_nonce, split_message
from bot.discord.rest import DiscordRest, use_api_base
from config.settings import Settings
from worker.jobs.question import ReplyTarget

log = logging.getLogger("codebot.discord.sink")


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
