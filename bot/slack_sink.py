"""How a worker answers in Slack: 👀, a progress placeholder, the answer, then ✅ or ⚠️.

The placeholder's ts is kept in Redis under the question id, so a retried job or the failure
callback (a new SlackSink, maybe on another machine) updates the same message rather than
posting a second one. Progress edits are throttled to one per
`progress_min_interval_seconds` (chat.update is Tier 3). Every Web API call goes to
`SLACK_API_URL` with a client that waits as long as Slack's `Retry-After` says on a 429.

The Slack calls are small keyword-only functions taking the client, shared with the adapter.
"""

from __future__ import annotations

import logging
import time

from redis import Redis
from redis.exceptions import RedisError
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from bot import texts
from bot.slack_format import format_for_slack
from config.settings import Settings
from worker.jobs.question import Question, ReplyTarget
from worker.jobs.sink import Answer, DeliveryFailed

log = logging.getLogger("codebot.slack")

RATE_LIMIT_RETRIES = 5  # 429s in a row one call waits out (each as long as Retry-After says)
CONNECTION_RETRIES = 2
PLACEHOLDER_KEY_PREFIX = "codebot:slack:placeholder:"
PLACEHOLDER_TTL_SECONDS = 24 * 3600
RECEIVED, ANSWERED, FAILED = "eyes", "white_check_mark", "warning"
_HARMLESS_REACTION_ERRORS = {"already_reacted", "no_reaction", "message_not_found", "too_many_reactions"}
# What "Slack could not be reached or said no" looks like, after the client's own retries.
SLACK_FAILURES = (SlackClientError, OSError)
_GONE_ERRORS = {"message_not_found", "cant_update_message", "edit_window_closed", "msg_too_long"}


def make_client(settings: Settings) -> WebClient:
    if not settings.slack_bot_token:
        raise RuntimeError("SLACK_BOT_TOKEN is not set: cannot post to Slack")
    return WebClient(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=settings.slack_api_url,
        retry_handlers=[
            ConnectionErrorRetryHandler(max_retry_count=CONNECTION_RETRIES),
            RateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES),
        ],
    )


# --- Web API calls -----------------------------------------------------------------------------


def post_message(*, client: WebClient, channel: str, thread_ts: str | None, text: str) -> str:
    """Post one mrkdwn message (already formatted and within limits); returns its ts."""
    response = client.chat_postMessage(
        channel=channel, thread_ts=thread_ts, text=text, unfurl_links=False, unfurl_media=False
    )
    return str(response["ts"])


def update_message(*, client: WebClient, channel: str, ts: str, text: str) -> None:
    client.chat_update(channel=channel, ts=ts, text=text)


def post_markdown(*, client: WebClient, channel: str, thread_ts: str | None, markdown: str) -> list[str]:
    """Convert, split and post Markdown in a thread; returns the ts of each message."""
    return [
        post_message(client=client, channel=channel, thread_ts=thread_ts, text=chunk)
        for chunk in format_for_slack(markdown)
    ]


def add_reaction(*, client: WebClient, channel: str, ts: str | None, name: str) -> None:
    """Best effort: a reaction that cannot be added never fails the answer."""
    if not ts:
        return
    try:
        client.reactions_add(channel=channel, timestamp=ts, name=name)
    except SlackApiError as exc:
        if exc.response.get("error") not in _HARMLESS_REACTION_ERRORS:
            log.warning("reactions.add %s failed: %s", name, exc.response.get("error"))
    except SLACK_FAILURES as exc:  # Slack out of reach (after the client's retries)
        log.warning("reactions.add %s failed: %s", name, exc)


def remove_reaction(*, client: WebClient, channel: str, ts: str | None, name: str) -> None:
    if not ts:
        return
    try:
        client.reactions_remove(channel=channel, timestamp=ts, name=name)
    except SlackApiError as exc:
        if exc.response.get("error") not in _HARMLESS_REACTION_ERRORS:
            log.warning("reactions.remove %s failed: %s", name, exc.response.get("error"))
    except SLACK_FAILURES as exc:  # Slack out of reach (after the client's retries)
        log.warning("reactions.remove %s failed: %s", name, exc)


def notify_admin(settings: Settings, target: ReplyTarget, user: str, markdown: str) -> None:
    """Tell an admin privately (worker.jobs.admin's notifier): an ephemeral message in the channel
    the command came from, or a DM from the app when that is impossible (e.g. not a member)."""
    client = make_client(settings)
    for chunk in format_for_slack(markdown):
        try:
            client.chat_postEphemeral(channel=target.channel, user=user, text=chunk)
        except SlackApiError as exc:
            log.info("ephemeral notice failed (%s); sending a DM", exc.response.get("error"))
            post_message(client=client, channel=user, thread_ts=None, text=chunk)


# --- the sink ------------------------------------------------------------------------------------


class SlackSink:
    """worker.jobs.sink.ReplySink for Slack (the contract is documented there); built inside
    the job (never before the fork)."""

    def __init__(self, settings: Settings, redis: Redis, question: Question) -> None:
        self.settings = settings
        self.redis = redis
        self.target = question.target
        self.key = PLACEHOLDER_KEY_PREFIX + question.id
        self.client = make_client(settings)
        self._last_progress = float("-inf")
        self._placeholder: str | None = None

    @property
    def thread(self) -> str | None:
        return self.target.thread or self.target.message

    def received(self) -> None:
        add_reaction(client=self.client, channel=self.target.channel, ts=self.target.message, name=RECEIVED)
        if self._placeholder_ts() is None:
            first = format_for_slack(texts.QUEUED)[0]
            try:
                ts = post_message(
                    client=self.client, channel=self.target.channel, thread_ts=self.thread, text=first
                )
            except SLACK_FAILURES as exc:  # a courtesy: the answer posts anew without a placeholder
                log.warning("placeholder not posted: %s", exc)
                return
            self._remember(ts)

    def progress(self, text: str) -> None:
        now = time.monotonic()
        if now - self._last_progress < self.settings.progress_min_interval_seconds:
            return
        self._last_progress = now
        chunks = format_for_slack(texts.PROGRESS.format(step=text))
        try:
            self._replace_placeholder(chunks[:1])
        except SLACK_FAILURES as exc:  # progress is a courtesy: it never fails the question
            log.warning("progress update failed: %s", exc)

    def answer(self, answer: Answer) -> None:
        chunks = format_for_slack(answer.markdown) or format_for_slack(texts.EMPTY_ANSWER)
        try:
            self._replace_placeholder(chunks)
        except SLACK_FAILURES as exc:
            raise DeliveryFailed(f"Slack did not take the answer: {exc}") from exc
        self._finish(ANSWERED)

    def failed(self, message: str) -> None:
        try:
            self._replace_placeholder(format_for_slack(message))
        except SLACK_FAILURES as exc:
            raise DeliveryFailed(f"Slack did not take the apology: {exc}") from exc
        self._finish(FAILED)

    # --- internals --------------------------------------------------------------------------

    def _placeholder_ts(self) -> str | None:
        if self._placeholder is None:
            try:
                raw = self.redis.get(self.key)
            except RedisError:
                raw = None
            self._placeholder = raw.decode() if isinstance(raw, bytes) else raw
        return self._placeholder

    def _remember(self, ts: str) -> None:
        self._placeholder = ts
        try:
            self.redis.set(self.key, ts, ex=PLACEHOLDER_TTL_SECONDS)
        except RedisError:
            log.warning("could not remember the Slack placeholder of %s", self.key)

    def _replace_placeholder(self, chunks: list[str]) -> None:
        """The first chunk replaces the placeholder (posted if there is none); the rest follow."""
        channel, placeholder = self.target.channel, self._placeholder_ts()
        rest = chunks[1:]
        if placeholder is not None and chunks:
            try:
                update_message(client=self.client, channel=channel, ts=placeholder, text=chunks[0])
            except SlackApiError as exc:
                if exc.response.get("error") not in _GONE_ERRORS:
                    raise
                rest = chunks  # the placeholder was deleted: post everything anew
        else:
            rest = chunks
        for index, chunk in enumerate(rest):
            ts = post_message(client=self.client, channel=channel, thread_ts=self.thread, text=chunk)
            if placeholder is None and index == 0:
                self._remember(ts)

    def _finish(self, reaction: str) -> None:
        remove_reaction(
            client=self.client, channel=self.target.channel, ts=self.target.message, name=RECEIVED
        )
        add_reaction(client=self.client, channel=self.target.channel, ts=self.target.message, name=reaction)
