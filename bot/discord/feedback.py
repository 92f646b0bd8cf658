"""👍/👎 on Discord answers: the buttons under each answer, and what the adapter does with a click.

The last message of an answer carries an action row with two buttons whose `custom_id` is
`codebot:fb:up:<question id>` or `codebot:fb:down:<question id>`. A click reaches the adapter as
an INTERACTION_CREATE of type 3 (MESSAGE_COMPONENT); the vote is stored (worker/jobs/
feedback.py: one per user, the same click twice counts once, the other button replaces it)
and answered within Discord's 3 s: a private "thanks" for 👍, a modal asking (optionally) why
for 👎, whose submission (type 5, MODAL_SUBMIT, `custom_id` `codebot:fbr:<question id>`)
attaches the reason. Nothing about a click is kept in the adapter's memory, so any adapter
process (restarted, or one of several) handles any click.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import discord
from redis import Redis

from bot import texts
from bot.intake import REDIS_DOWN
from config.settings import Settings
from worker.jobs import feedback

log = logging.getLogger("codebot.discord.feedback")

VOTE_PREFIX = "codebot:fb:"  # + "up:" / "down:" + question id
REASON_PREFIX = "codebot:fbr:"  # + question id: the reason modal
REASON_INPUT_ID = "reason"
CUSTOM_ID_CHARS = 100  # Discord's limit on a component's custom_id
BUTTON, ACTION_ROW, SECONDARY = 2, 1, 2
EPHEMERAL = 64


def feedback_buttons(question_id: str) -> list[dict[str, Any]]:
    """The action row under an answer; none when the id would not fit a custom_id."""
    if len(VOTE_PREFIX + "down:" + question_id) > CUSTOM_ID_CHARS:
        return []

    def button(vote: str, emoji: str, label: str) -> dict[str, Any]:
        return {
            "type": BUTTON,
            "style": SECONDARY,
            "emoji": {"name": emoji},
            "custom_id": f"{VOTE_PREFIX}{vote}:{question_id}",
            "label": label,
        }

    return [
        {
            "type": ACTION_ROW,
            "components": [button("up", "👍", "Helpful"), button("down", "👎", "Not helpful")],
        }
    ]


def parse_vote(custom_id: str) -> tuple[feedback.Vote, str] | None:
    if not custom_id.startswith(VOTE_PREFIX):
        return None
    vote, _, question_id = custom_id.removeprefix(VOTE_PREFIX).partition(":")
    if vote not in feedback.VOTES or not question_id.startswith("q-"):
        return None
    return ("up" if vote == "up" else "down"), question_id


def submitted_text(components: list[dict[str, Any]], custom_id: str) -> str:
    """The value of the text input `custom_id` in a modal submission (in an action row, or in a
    label component, the two shapes Discord sends)."""
    for component in components:
        inner = component.get("components") or ([component["component"]] if "component" in component else [])
        for item in inner:
            if item.get("custom_id") == custom_id:
                return str(item.get("value") or "")
    return ""


class ReasonModal(discord.ui.Modal):
    """Sent in answer to a 👎; its submission is handled statelessly by FeedbackInteractions."""

    reason: discord.ui.TextInput[ReasonModal] = discord.ui.TextInput(
        label=texts.FEEDBACK_MODAL_SHORT_LABEL,
        style=discord.TextStyle.long,
        required=False,
        max_length=feedback.REASON_MAX_CHARS,
        custom_id=REASON_INPUT_ID,
    )

    def __init__(self, question_id: str) -> None:
        super().__init__(
            title=texts.FEEDBACK_MODAL_TITLE, custom_id=REASON_PREFIX + question_id, timeout=None
        )

    async def on_submit(self, interaction: discord.Interaction) -> None:
        """Handled in FeedbackInteractions (any adapter process, not only the one that sent it)."""


class FeedbackInteractions:
    """The adapter's handler for clicks on the feedback buttons and the reason modal."""

    def __init__(self, settings: Settings, redis: Callable[[], Redis]) -> None:
        self.settings = settings
        self.redis = redis

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        data: Any = interaction.data or {}
        custom_id = str(data.get("custom_id") or "")
        if interaction.type == discord.InteractionType.component and custom_id.startswith(VOTE_PREFIX):
            await self._vote(interaction, custom_id)
        elif interaction.type == discord.InteractionType.modal_submit and custom_id.startswith(REASON_PREFIX):
            await self._reason(
                interaction, custom_id.removeprefix(REASON_PREFIX), data.get("components") or []
            )

    async def _vote(self, interaction: discord.Interaction, custom_id: str) -> None:
        parsed = parse_vote(custom_id)
        if parsed is None:
            return
        vote, question_id = parsed
        user = str(interaction.user.id)
        channel = str(interaction.channel_id or "")
        try:
            recorded = await asyncio.to_thread(
                feedback.record_vote, self.redis(), self.settings, question_id, "discord", user, vote, channel
            )
        except REDIS_DOWN as exc:
            log.warning("discord: feedback on %s not stored: %s", question_id, exc)
            await interaction.response.send_message(texts.FEEDBACK_NOT_STORED, ephemeral=True)
            return
        log.info("discord: %s vote %s on %s by %s in %s", recorded, vote, question_id, user, channel)
        if recorded == "refused":  # expired, or a button naming another channel's answer
            await interaction.response.send_message(texts.FEEDBACK_EXPIRED, ephemeral=True)
            return
        if vote == "down":
            await interaction.response.send_modal(ReasonModal(question_id))
        else:
            await interaction.response.send_message(texts.FEEDBACK_THANKS, ephemeral=True)

    async def _reason(
        self, interaction: discord.Interaction, question_id: str, components: list[Any]
    ) -> None:
        reason = submitted_text(components, REASON_INPUT_ID)
        if reason.strip() and question_id.startswith("q-"):
            try:
                await asyncio.to_thread(
                    feedback.record_reason,
                    self.redis(),
                    self.settings,
                    question_id,
                    str(interaction.user.id),
                    reason,
                )
            except REDIS_DOWN as exc:
                log.warning("discord: feedback reason on %s not stored: %s", question_id, exc)
        await interaction.response.send_message(texts.FEEDBACK_THANKS, ephemeral=True)
