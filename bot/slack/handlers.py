"""The Slack adapter's listeners: decide what is a question, hand it to the intake, render.

An event is acked before these run (HTTP mode: before bolt sees it, bot/slack/http_server.py),
so Slack gets its 200 in milliseconds whatever happens here; slash commands ack first thing.

Rules (docs/slack.md):
- A question is a mention in a channel, any message in a DM, or a follow-up: a reply in a
  thread where codebot answered, from someone who already asked it there (others mention
  it once to join). A reply that mentions someone else but not codebot is left alone.
- Ignored: the bot's own messages, other bots, edits, deletions and every other subtype.
- The same message arrives as `app_mention` and `message.*` with different event ids, and
  Slack retries deliveries: its identity (channel, ts) is what the intake dedupes on.
- Allow-lists are keyed `slack:<channel id>`; a DM is a channel like any other.
Dedupe, scope, limits, thread memory and the enqueue are bot/intake.py, shared with Discord.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from redis import Redis
from slack_sdk import WebClient

from bot import texts
from bot.intake import REDIS_DOWN, Ask, Intake, Outcome
from bot.slack.format import format_for_slack
from bot.slack.sink import RECEIVED, SLACK_FAILURES, add_reaction, post_markdown, remove_reaction
from config.settings import Settings
from worker.jobs.admin import enqueue_refresh, is_admin, repos_listing, status_report
from worker.jobs.question import ReplyTarget
from worker.jobs.runtime import Runtime
from worker.jobs.scope import resolve_scope

log = logging.getLogger("codebot.slack")

_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")
_ANSWERED_SUBTYPES = {None, "file_share", "thread_broadcast"}


@dataclass
class SlackDeps:
    settings: Settings
    redis: Redis
    runtime: Runtime  # the whitelist, and this machine's mirrors for listings


@dataclass(frozen=True)
class Incoming:
    """A user message that may be a question."""

    channel: str
    ts: str
    thread: str  # where to answer: the message's thread, or the message itself
    user: str
    text: str
    is_dm: bool
    in_thread: bool  # a reply inside an existing thread
    mentioned: bool  # codebot is mentioned in it
    mentions_other: bool  # someone else is mentioned in it
    team: str | None = None  # the workspace: a streamed answer in a channel names its recipient's
    files: int = 0  # files attached to the message (the worker reads them by its ts)

    @property
    def conversation(self) -> str:
        """The thread-memory key of the thread answers go in (a ts is unique per channel)."""
        return f"{self.channel}:{self.thread}"

    def ask(self, bot_user_id: str | None) -> Ask:
        target = ReplyTarget(
            platform="slack",
            channel=self.channel,
            thread=self.thread,
            message=self.ts,
            is_dm=self.is_dm,
            team=self.team,
        )
        return Ask(
            asker=self.user,
            text=question_text(self.text, bot_user_id),
            target=target,
            identity=(self.channel, self.ts),
            conversation=self.conversation,
            in_thread=self.in_thread,
            opens_thread=not self.in_thread,
            attached_files=self.files,
        )


def parse_message(event: dict[str, Any], bot_user_id: str | None, team: str | None = None) -> Incoming | None:
    """The event as a possible question, or None for what is never answered."""
    if event.get("subtype") not in _ANSWERED_SUBTYPES or event.get("bot_id") or event.get("bot_profile"):
        return None
    user, channel, ts = event.get("user"), event.get("channel"), event.get("ts")
    if (
        not (isinstance(user, str) and isinstance(channel, str) and isinstance(ts, str))
        or user == bot_user_id
    ):
        return None
    text = str(event.get("text") or "")
    mentioned_ids = set(_MENTION.findall(text))
    thread = event.get("thread_ts")
    return Incoming(
        channel=channel,
        ts=ts,
        thread=str(thread or ts),
        user=user,
        text=text,
        is_dm=event.get("channel_type") == "im" or channel.startswith("D"),
        in_thread=bool(thread) and thread != ts,
        mentioned=event.get("type") == "app_mention" or (bot_user_id in mentioned_ids),
        mentions_other=bool(mentioned_ids - {bot_user_id}),
        team=str(event.get("team") or team or "") or None,
        files=sum(1 for item in event.get("files") or [] if isinstance(item, dict)),
    )


def question_text(text: str, bot_user_id: str | None) -> str:
    """The user's words: codebot's mention removed, Slack's escapes undone."""
    stripped = _MENTION.sub(lambda m: "" if m.group(1) == bot_user_id else m.group(0), text)
    return re.sub(r"\s+", " ", html.unescape(stripped)).strip()


class SlackHandlers:
    """Bolt listeners (bolt injects `event`, `context`, `client`, `ack`, … by parameter name)."""

    def __init__(self, deps: SlackDeps) -> None:
        self.deps = deps
        self.intake = Intake(deps.settings, deps.runtime.whitelist, lambda: deps.redis)

    # --- events --------------------------------------------------------------------------------

    def on_app_mention(self, event: dict[str, Any], context: dict[str, Any], client: WebClient) -> None:
        incoming = parse_message(event, context.get("bot_user_id"), context.get("team_id"))
        if incoming is not None:
            self.handle(incoming, client, context.get("bot_user_id"))

    def on_message(self, event: dict[str, Any], context: dict[str, Any], client: WebClient) -> None:
        bot = context.get("bot_user_id")
        incoming = parse_message(event, bot, context.get("team_id"))
        if incoming is None:
            return
        addressed = incoming.is_dm or incoming.mentioned
        # a follow-up with nothing to ask (a screenshot, a file) is talk in the thread, not a
        # question: it gets no "you mentioned me without a question"
        asks = bool(incoming.text.strip())
        if addressed or (
            incoming.in_thread and asks and not incoming.mentions_other and self._asked_here_before(incoming)
        ):
            self.handle(incoming, client, bot)

    def ignore(self) -> None:
        """Any other subscribed event: acknowledged (so Slack never retries it) and dropped."""

    def _asked_here_before(self, incoming: Incoming) -> bool:
        try:
            return self.intake.asked_before("slack", incoming.conversation, incoming.user)
        except REDIS_DOWN:
            return False  # cannot tell: stay silent rather than answer every thread reply

    def handle(self, incoming: Incoming, client: WebClient, bot_user_id: str | None) -> None:
        self.render(self.intake.submit(incoming.ask(bot_user_id)), incoming, client)

    def render(self, outcome: Outcome, incoming: Incoming, client: WebClient) -> None:
        if outcome.kind == "reply":
            self._reply(client, incoming, outcome.text)
        elif outcome.kind == "enqueued":
            self._mark_received(client, incoming, outcome)

    def _mark_received(self, client: WebClient, incoming: Incoming, outcome: Outcome) -> None:
        """👀 on a question just enqueued. A fast worker may answer it, and take its 👀 off,
        before ours lands (a Slack call takes ~100 ms; its retries seconds): a question answered
        by the time ours is on gets ours taken off. The worker stores the answered marker before
        it takes 👀 off, so one of the two removals comes after our add."""
        add_reaction(client=client, channel=incoming.channel, ts=incoming.ts, name=RECEIVED)
        question = outcome.question
        if question is not None and self.intake.already_answered(question.id):
            remove_reaction(client=client, channel=incoming.channel, ts=incoming.ts, name=RECEIVED)

    def _reply(self, client: WebClient, incoming: Incoming, markdown: str) -> None:
        try:
            post_markdown(
                client=client, channel=incoming.channel, thread_ts=incoming.thread, markdown=markdown
            )
        except SLACK_FAILURES as exc:
            log.warning("slack reply failed in %s: %s", incoming.channel, exc)

    # --- /codebot --------------------------------------------------------------------------------

    def on_command(
        self, ack: Callable[..., None], command: dict[str, Any], respond: Callable[..., Any]
    ) -> None:
        words = str(command.get("text") or "").split()
        sub, args = (words[0].lower(), words[1:]) if words else ("help", [])
        user, channel = str(command.get("user_id")), str(command.get("channel_id"))
        if sub == "help":
            ack(text=_mrkdwn(texts.HELP), response_type="ephemeral")
            return
        if sub not in ("repos", "refresh", "status"):
            ack(text=_mrkdwn(texts.UNKNOWN_COMMAND.format(command=sub)), response_type="ephemeral")
            return
        if sub != "repos" and not is_admin(self.deps.settings, f"slack:{user}"):
            log.info("slack: refused /codebot %s to non-admin %s", sub, user)
            ack(text=_mrkdwn(texts.NOT_ADMIN.format(command=sub)), response_type="ephemeral")
            return
        ack()  # what follows reads Redis and disk: answer through response_url, not the ack
        try:
            markdown = self._command(sub, args, user, channel)
        except REDIS_DOWN as exc:
            log.warning("slack: Redis unavailable for /codebot %s: %s", sub, exc)
            markdown = texts.queue_trouble(exc)
        for chunk in format_for_slack(markdown):
            respond(text=chunk, response_type="ephemeral")

    def _command(self, sub: str, args: list[str], user: str, channel: str) -> str:
        deps = self.deps
        if sub == "repos":
            return repos_listing(deps.redis, deps.runtime, f"slack:{channel}")  # Redis down: commits "?"
        if sub == "status":
            return status_report(deps.redis, deps.runtime)
        names = [a.lower() for a in args]
        if not names:
            return texts.REFRESH_USAGE
        if names == ["all"]:
            names = deps.runtime.whitelist.names()
        else:
            scope = resolve_scope(deps.runtime.whitelist, None, names)
            if scope.refusal:
                return scope.refusal
        target = ReplyTarget(platform="slack", channel=channel, is_dm=channel.startswith("D"))
        job_id = enqueue_refresh(deps.redis, names, target, requested_by=user)
        log.info("slack: refresh %s queued job=%s by=%s", ",".join(names), job_id, user)
        return texts.REFRESH_QUEUED.format(names=", ".join(f"`{n}`" for n in names))


def _mrkdwn(markdown: str) -> str:
    """A short text (an ack) as one mrkdwn message."""
    return "\n".join(format_for_slack(markdown))
