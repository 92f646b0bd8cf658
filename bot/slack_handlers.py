"""What the Slack adapter does with each event: check, dedupe, enqueue. Never the model.

Bolt acks an Events API request before these run (process_before_response=False), so Slack
gets its 200 in milliseconds whatever happens here; slash commands ack first thing.

Rules (docs/slack.md):
- A question is a mention in a channel, any message in a DM, or a follow-up: a reply in a
  thread where codebot answered, from someone who already asked it there (others mention
  it once to join). A reply that mentions someone else but not codebot is left alone.
- One question per user message whatever Slack delivers: the same message arrives as
  `app_mention` and `message.*` with different event ids, and Slack retries deliveries, so the
  message identity (channel, ts) is claimed in Redis (`SET NX`) before anything else; the
  job id derives from it too.
- Ignored: the bot's own messages, other bots, edits, deletions and every other subtype.
- Scope: `repo:NAME` in the text, checked against the channel's allow-list (`slack:<channel
  id>`). A DM is a channel like any other: it sees the repos with no allow-list, plus those
  listing that DM's id. A follow-up without `repo:` keeps the scope its thread started with.
- Redis unreachable: the asker is told (bot/texts QUEUE_UNAVAILABLE) once per message;
  the redis-py client reconnects by itself when the server is back.
"""

from __future__ import annotations

import html
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from redis import Redis
from redis.exceptions import RedisError
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot import texts
from bot.slack_format import format_for_slack
from bot.slack_sink import RECEIVED, add_reaction, post_markdown
from config.settings import Settings
from worker.jobs.admin import enqueue_refresh, is_admin, repos_listing, status_report
from worker.jobs.limits import check_rate, queue_full
from worker.jobs.question import Question, ReplyTarget, event_identity
from worker.jobs.queue import enqueue_question
from worker.jobs.runtime import Runtime
from worker.jobs.scope import extract_repo_filter, resolve_scope
from worker.jobs.threads import THREAD_TTL_SECONDS, load_turns, mark_thread
from worker.ops.accounting import BUDGET_SPENT_MESSAGE, budget_spent

log = logging.getLogger("codebot.slack")

SEEN_KEY_PREFIX = "codebot:slack:seen:"
SEEN_TTL_SECONDS = 24 * 3600  # longer than Slack's last retry (~5 min) and any replay we care about
THREAD_META_PREFIX = "codebot:slack:thread:"  # hash: repos, asker:<user id>
RECENT_MAX_ENTRIES = 10_000  # in-process memory of messages answered while Redis was down
_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")
_ANSWERED_SUBTYPES = {None, "file_share", "thread_broadcast"}
HELP_WORDS = {"help", "?", "hi", "hello"}


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

    @property
    def channel_key(self) -> str:
        return f"slack:{self.channel}"


def parse_message(event: dict[str, Any], bot_user_id: str | None) -> Incoming | None:
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
    )


def question_text(text: str, bot_user_id: str | None) -> str:
    """The user's words: codebot's mention removed, Slack's escapes undone."""
    stripped = _MENTION.sub(lambda m: "" if m.group(1) == bot_user_id else m.group(0), text)
    return re.sub(r"\s+", " ", html.unescape(stripped)).strip()


@dataclass
class _Recent:
    """A bounded set, for telling an asker once that Redis is down (Redis can't dedupe then)."""

    keys: OrderedDict[str, None] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def first(self, key: str) -> bool:
        with self.lock:
            if key in self.keys:
                return False
            self.keys[key] = None
            while len(self.keys) > RECENT_MAX_ENTRIES:
                self.keys.popitem(last=False)
            return True


class SlackHandlers:
    """Bolt listeners (bolt injects `event`, `context`, `client`, `ack`, … by parameter name)."""

    def __init__(self, deps: SlackDeps) -> None:
        self.deps = deps
        self.recent = _Recent()

    # --- events --------------------------------------------------------------------------------

    def on_app_mention(self, event: dict[str, Any], context: dict[str, Any], client: WebClient) -> None:
        incoming = parse_message(event, context.get("bot_user_id"))
        if incoming is not None:
            self.handle(incoming, client, context.get("bot_user_id"))

    def on_message(self, event: dict[str, Any], context: dict[str, Any], client: WebClient) -> None:
        bot = context.get("bot_user_id")
        incoming = parse_message(event, bot)
        if incoming is None:
            return
        addressed = incoming.is_dm or incoming.mentioned
        # a follow-up with nothing to ask (a screenshot, a file) is talk in the thread, not a
        # question: it gets no "you mentioned me without a question"
        asks = bool(incoming.text.strip())
        if addressed or (
            incoming.in_thread and asks and not incoming.mentions_other and self._is_follow_up(incoming)
        ):
            self.handle(incoming, client, bot)

    def ignore(self) -> None:
        """Any other subscribed event: acknowledged (so Slack never retries it) and dropped."""

    def _is_follow_up(self, incoming: Incoming) -> bool:
        try:
            key = THREAD_META_PREFIX + f"{incoming.channel}:{incoming.thread}"
            return bool(self.deps.redis.hexists(key, f"asker:{incoming.user}"))
        except RedisError:
            return False  # cannot tell: stay silent rather than answer every thread reply

    def handle(self, incoming: Incoming, client: WebClient, bot_user_id: str | None) -> None:
        identity = f"{incoming.channel}:{incoming.ts}"
        try:
            if not self.deps.redis.set(SEEN_KEY_PREFIX + identity, "1", nx=True, ex=SEEN_TTL_SECONDS):
                return  # a retry, or the other event of the same message
            self._ask(incoming, client, bot_user_id)
        except RedisError as exc:
            log.warning("slack: Redis unavailable for message %s: %s", identity, exc)
            if self.recent.first(identity):
                self._reply(client, incoming, texts.queue_trouble(exc))

    def _ask(self, incoming: Incoming, client: WebClient, bot_user_id: str | None) -> None:
        deps, redis = self.deps, self.deps.redis
        text, requested = extract_repo_filter(question_text(incoming.text, bot_user_id))
        if not text or text.lower().strip("!.") in HELP_WORDS:
            help_text = texts.EMPTY_MENTION if not text else texts.HELP
            self._reply(client, incoming, f"{help_text}\n{texts.HELP_IN_DM}" if incoming.is_dm else help_text)
            return
        meta_key = THREAD_META_PREFIX + f"{incoming.channel}:{incoming.thread}"
        if not requested and incoming.in_thread:
            kept = redis.hget(meta_key, "repos")
            requested = [n for n in (kept.decode() if isinstance(kept, bytes) else "").split(",") if n]
        scope = resolve_scope(deps.runtime.whitelist, incoming.channel_key, requested)
        if scope.refusal:
            self._reply(client, incoming, scope.refusal)
            return
        if budget_spent(redis, deps.settings):
            self._reply(client, incoming, BUDGET_SPENT_MESSAGE)
            return
        depth = queue_full(redis, deps.settings)
        if depth is not None:
            self._reply(client, incoming, texts.QUEUE_FULL.format(depth=depth))
            return
        wait = check_rate(redis, f"slack:{incoming.user}", deps.settings)
        if wait is not None:
            self._reply(client, incoming, texts.RATE_LIMITED.format(seconds=wait))
            return
        target = ReplyTarget(
            platform="slack",
            channel=incoming.channel,
            thread=incoming.thread,
            message=incoming.ts,
            is_dm=incoming.is_dm,
        )
        question = Question(
            id=event_identity("slack", incoming.channel, incoming.ts),
            asker=incoming.user,
            target=target,
            text=text,
            repos=scope.repos,
            history=load_turns(redis, "slack", incoming.channel, incoming.thread)
            if incoming.in_thread
            else [],
        )
        enqueued = enqueue_question(redis, question, deps.settings)
        if enqueued.duplicate:
            return
        self._remember_thread(meta_key, incoming, requested)
        log.info(
            "slack question queued id=%s channel=%s position=%s",
            question.id,
            incoming.channel,
            enqueued.position,
        )
        add_reaction(client=client, channel=incoming.channel, ts=incoming.ts, name=RECEIVED)

    def _remember_thread(self, meta_key: str, incoming: Incoming, requested: list[str]) -> None:
        pipe = self.deps.redis.pipeline()
        pipe.hset(meta_key, f"asker:{incoming.user}", "1")
        if requested:
            pipe.hset(meta_key, "repos", ",".join(requested))
        pipe.expire(meta_key, THREAD_TTL_SECONDS)
        pipe.execute()
        mark_thread(self.deps.redis, "slack", incoming.channel, incoming.thread)

    def _reply(self, client: WebClient, incoming: Incoming, markdown: str) -> None:
        try:
            post_markdown(
                client=client, channel=incoming.channel, thread_ts=incoming.thread, markdown=markdown
            )
        except SlackApiError as exc:
            log.warning("slack reply failed in %s: %s", incoming.channel, exc.response.get("error"))

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
        except RedisError as exc:
            log.warning("slack: Redis unavailable for /codebot %s: %s", sub, exc)
            markdown = texts.queue_trouble(exc)
        for chunk in format_for_slack(markdown):
            respond(text=chunk, response_type="ephemeral")

    def _command(self, sub: str, args: list[str], user: str, channel: str) -> str:
        deps = self.deps
        if sub == "repos":
            return repos_listing(deps.redis, deps.runtime, f"slack:{channel}")
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
