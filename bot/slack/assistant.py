"""Slack's Agents & AI Apps surface: the side panel where a user opens a thread with codebot.

When a user opens one, Slack sends `assistant_thread_started` (docs.slack.dev/reference/
events/assistant_thread_started) with the thread: a direct-message channel with the app and a
`thread_ts`. codebot greets in that thread, offers suggested prompts built from the repos this
user may ask about there (`assistant.threads.setSuggestedPrompts`), and names the thread
(`assistant.threads.setTitle`). Messages the user writes in it arrive as `message.im` and are
answered like any direct message (bot/slack/handlers.py); the answer streams into the thread
with its loading states (bot/slack/stream.py).

A workspace whose app is not set up for the surface never sends these events: nothing here
runs, and everything else works as before. `assistant_thread_context_changed` (the user moved
to another channel with the panel open) is acknowledged and needs nothing: a DM's scope is the
repos open to every channel, whatever channel the user looks at.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk import WebClient

from bot import texts
from bot.slack.format import format_for_slack
from bot.slack.sink import SLACK_FAILURES, post_message
from config.repos import Whitelist

log = logging.getLogger("codebot.slack.assistant")

MAX_PROMPTS = 4  # Slack shows at most four suggested prompts
PROMPT_TITLE_CHARS = 75


def suggested_prompts(whitelist: Whitelist, channel_key: str) -> list[dict[str, str]]:
    """Up to four prompts about repos open in `channel_key`, in whitelist order."""
    repos = [spec for spec in whitelist.repos if spec.allowed_in(channel_key)]
    prompts = []
    for spec in repos[: MAX_PROMPTS - 1]:
        title = texts.ASSISTANT_PROMPT_TITLE.format(repo=spec.name)[:PROMPT_TITLE_CHARS]
        prompts.append({"title": title, "message": texts.ASSISTANT_PROMPT_MESSAGE.format(repo=spec.name)})
    if repos:
        prompts.append({"title": texts.ASSISTANT_PROMPT_REPOS_TITLE, "message": texts.ASSISTANT_PROMPT_REPOS})
    return prompts


def greeting(whitelist: Whitelist, channel_key: str) -> str:
    names = [spec.name for spec in whitelist.repos if spec.allowed_in(channel_key)]
    if not names:
        return texts.ASSISTANT_GREETING_NO_REPOS
    return texts.ASSISTANT_GREETING.format(repos=", ".join(f"`{name}`" for name in names))


class SlackAssistant:
    """Bolt listeners for the assistant thread events."""

    def __init__(self, whitelist: Whitelist) -> None:
        self.whitelist = whitelist

    def on_thread_started(self, event: dict[str, Any], client: WebClient) -> None:
        thread = event.get("assistant_thread") or {}
        channel, thread_ts = thread.get("channel_id"), thread.get("thread_ts")
        if not (isinstance(channel, str) and isinstance(thread_ts, str)):
            return
        key = f"slack:{channel}"
        calls = (
            lambda: client.assistant_threads_setTitle(
                channel_id=channel, thread_ts=thread_ts, title=texts.ASSISTANT_THREAD_TITLE
            ),
            lambda: [
                post_message(client=client, channel=channel, thread_ts=thread_ts, text=chunk)
                for chunk in format_for_slack(greeting(self.whitelist, key))
            ],
            lambda: (
                client.assistant_threads_setSuggestedPrompts(
                    channel_id=channel,
                    thread_ts=thread_ts,
                    title=texts.ASSISTANT_PROMPTS_TITLE,
                    prompts=suggested_prompts(self.whitelist, key),
                )
                if suggested_prompts(self.whitelist, key)
                else None
            ),
        )
        for call in calls:  # each is a courtesy: one refused does not stop the others
            try:
                call()
            except SLACK_FAILURES as exc:
                log.warning("slack: assistant thread %s in %s: %s", thread_ts, channel, exc)

    def on_context_changed(self) -> None:
        """Acknowledged: a DM's scope does not depend on the channel the user looks at."""
