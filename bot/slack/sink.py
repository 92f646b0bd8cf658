"""How a worker answers in Slack: 👀, a progress placeholder, the answer, then ✅ or ⚠️.

Every message the sink posts for a question is recorded in Redis under the question id the
moment Slack returns its ts: the placeholder (`codebot:slack:placeholder:<id>`) and the
answer's further chunks (`codebot:slack:chunks:<id>`). A retried job, the failure callback or
the outbox delivering a stored answer again (a new SlackSink, maybe on another machine, hours
later) updates those messages rather than posting second ones. The final message counts as
delivered only with its reactions: a transient failure of one (5xx, `ratelimited`, 429, no
connection) fails the delivery, which the outbox completes later (worker/jobs/sink.py).

Progress edits are throttled to one per `progress_min_interval_seconds` (chat.update is
Tier 3). Every Web API call goes to `SLACK_API_URL` with a client that waits as long as
Slack's `Retry-After` says on a 429, a few times, before it gives the failure to the outbox.

The Slack calls are small keyword-only functions taking the client, shared with the adapter.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Literal

from redis import Redis
from redis.exceptions import RedisError
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from bot import texts
from bot.queue_notices import is_waiting_notice, notice_replaced
from bot.slack.format import feedback_block, format_for_slack, text_blocks
from config.settings import Settings
from worker.jobs.question import Question, ReplyTarget
from worker.jobs.sink import Answer, DeliveryFailed
from worker.ops.claims import claim

log = logging.getLogger("codebot.slack")

# 429s in a row one call waits out (each as long as Retry-After says); after that the outbox
# waits at least Retry-After itself, without holding a worker (worker/jobs/outbox.py)
RATE_LIMIT_RETRIES = 2
CONNECTION_RETRIES = 2
PLACEHOLDER_KEY_PREFIX = "codebot:slack:placeholder:"  # + question id -> the placeholder's ts
CHUNKS_KEY_PREFIX = "codebot:slack:chunks:"  # + question id -> hash: chunk number (1, 2…) -> ts
# Records outlive the outbox's last attempt (delivery_give_up_seconds) by this much.
RECORD_MARGIN_SECONDS = 24 * 3600
RECEIVED, ANSWERED, FAILED = "eyes", "white_check_mark", "warning"
_HARMLESS_REACTION_ERRORS = {"already_reacted", "no_reaction", "message_not_found", "too_many_reactions"}
# What "Slack could not be reached or said no" looks like, after the client's own retries.
SLACK_FAILURES = (SlackClientError, OSError)
_GONE_ERRORS = {"message_not_found", "cant_update_message", "edit_window_closed", "msg_too_long"}
# chat.update of a message that is still streaming (measured on Slack; documented nowhere)
STREAMING_STATE_CONFLICT = "streaming_state_conflict"
# A stream that takes no more: stopped already, by the user, or not ours (chat.appendStream docs)
STREAM_OVER_ERRORS = {"message_not_in_streaming_state", "stopped_by_user", "message_not_owned_by_app"}
# Slack saying it never will take a message there: the outbox stops at once (listed in status).
_NEVER_ERRORS = {"channel_not_found", "is_archived"}
# Slack errors that pass: an outage, a rate limit, a server error (HTTP 200 with ok:false too).
_TRANSIENT_ERRORS = {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}


def is_transient(exc: Exception) -> bool:
    """Slack out of reach, overloaded or limiting us: trying again later will work."""
    if isinstance(exc, SlackApiError):
        status = exc.response.status_code
        return status >= 500 or status == 429 or exc.response.get("error") in _TRANSIENT_ERRORS
    return True  # no answer at all (connection refused, timeout): SlackClientError or OSError


def delivery_failed(what: str, exc: Exception) -> DeliveryFailed:
    """The DeliveryFailed for a Slack failure: retried by the outbox unless Slack says never."""
    if isinstance(exc, SlackApiError):
        response = exc.response
        error = response.get("error") or f"HTTP {response.status_code}"
        detail = f"{error} (HTTP {response.status_code})"
        return DeliveryFailed(
            f"Slack did not take the {what}: {detail}",
            retryable=error not in _NEVER_ERRORS,
            retry_after_seconds=_retry_after(response.headers),
        )
    return DeliveryFailed(f"Slack did not take the {what}: {exc}")


def _retry_after(headers: dict[str, Any]) -> float | None:
    for name, value in headers.items():
        if name.lower() == "retry-after":
            raw = value[0] if isinstance(value, list) else value
            try:
                return float(raw)
            except (TypeError, ValueError):
                return None
    return None


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


Blocks = list[dict[str, Any]]


def post_message(
    *, client: WebClient, channel: str, thread_ts: str | None, text: str, blocks: Blocks | None = None
) -> str:
    """Post one mrkdwn message (already formatted and within limits); returns its ts. With
    `blocks`, `text` is the notification and screen-reader fallback."""
    response = client.chat_postMessage(
        channel=channel, thread_ts=thread_ts, text=text, blocks=blocks, unfurl_links=False, unfurl_media=False
    )
    return str(response["ts"])


def update_message(
    *, client: WebClient, channel: str, ts: str, text: str, blocks: Blocks | None = None
) -> None:
    """Replace a message's text (and blocks). A message still streaming (a stream whose run
    died, or that never got its stop) refuses edits with `streaming_state_conflict`: the stream
    is stopped first, then the message replaced."""
    try:
        client.chat_update(channel=channel, ts=ts, text=text, blocks=blocks)
    except SlackApiError as exc:
        if exc.response.get("error") != STREAMING_STATE_CONFLICT:
            raise
        stop_stream(client=client, channel=channel, ts=ts)
        client.chat_update(channel=channel, ts=ts, text=text, blocks=blocks)


def stop_stream(*, client: WebClient, channel: str, ts: str) -> None:
    """End a stream as it is (already ended: nothing to do)."""
    try:
        client.chat_stopStream(channel=channel, ts=ts)
    except SlackApiError as exc:
        if exc.response.get("error") not in STREAM_OVER_ERRORS:
            raise


def post_markdown(*, client: WebClient, channel: str, thread_ts: str | None, markdown: str) -> list[str]:
    """Convert, split and post Markdown in a thread; returns the ts of each message."""
    return [
        post_message(client=client, channel=channel, thread_ts=thread_ts, text=chunk)
        for chunk in format_for_slack(markdown)
    ]


def add_reaction(*, client: WebClient, channel: str, ts: str | None, name: str) -> None:
    """Best effort (👀 as a question is taken up): a reaction that cannot be added is logged."""
    _change_reaction("add", client=client, channel=channel, ts=ts, name=name)


def remove_reaction(*, client: WebClient, channel: str, ts: str | None, name: str) -> None:
    """Best effort, as add_reaction: a reaction that cannot be taken off is logged."""
    _change_reaction("remove", client=client, channel=channel, ts=ts, name=name)


def _change_reaction(
    change: Literal["add", "remove"], *, client: WebClient, channel: str, ts: str | None, name: str
) -> None:
    if not ts:
        return
    call = client.reactions_add if change == "add" else client.reactions_remove
    try:
        call(channel=channel, timestamp=ts, name=name)
    except SlackApiError as exc:
        if exc.response.get("error") not in _HARMLESS_REACTION_ERRORS:
            log.warning("reactions.%s %s failed: %s", change, name, exc.response.get("error"))
    except SLACK_FAILURES as exc:  # Slack out of reach (after the client's retries)
        log.warning("reactions.%s %s failed: %s", change, name, exc)


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
    the job (never before the fork) or by the outbox."""

    def __init__(self, settings: Settings, redis: Redis, question: Question) -> None:
        self.settings = settings
        self.redis = redis
        self.target = question.target
        self.question_id = question.id
        self.key = PLACEHOLDER_KEY_PREFIX + question.id
        self.chunks_key = CHUNKS_KEY_PREFIX + question.id
        self.record_seconds = int(settings.delivery_give_up_seconds) + RECORD_MARGIN_SECONDS
        self.client = make_client(settings)
        self._last_progress = float("-inf")
        self._placeholder: str | None = None

    @property
    def thread(self) -> str | None:
        return self.target.thread or self.target.message

    def received(self) -> None:
        add_reaction(client=self.client, channel=self.target.channel, ts=self.target.message, name=RECEIVED)
        first = format_for_slack(texts.QUEUED)[0]
        try:
            ts = self._placeholder_ts()
            if ts is None:
                self._post_placeholder(first)
            elif self._shows_waiting():  # the adapter's "waiting in the queue": the wait is over
                update_message(client=self.client, channel=self.target.channel, ts=ts, text=first)
                notice_replaced(self.redis, self.question_id)
        except SLACK_FAILURES as exc:  # a courtesy: the answer posts anew without a placeholder
            log.warning("placeholder not posted: %s", exc)
        except RedisError as exc:
            log.warning("placeholder of %s not checked: %s", self.question_id, exc)

    def show_waiting(self, text: str) -> None:
        """The placeholder of a question still in the queue says so (bot/queue_notices.py).
        Raises for a Slack or Redis failure: the next notice pass tries again."""
        first = format_for_slack(text)[0]
        ts = self._placeholder_ts()
        if ts is None:
            self._post_placeholder(first)
        else:
            update_message(client=self.client, channel=self.target.channel, ts=ts, text=first)

    def progress(self, text: str) -> None:
        now = time.monotonic()
        if now - self._last_progress < self.settings.progress_min_interval_seconds:
            return
        self._last_progress = now
        chunks = format_for_slack(texts.PROGRESS.format(step=text))
        try:
            self._show(chunks[:1])
        except SLACK_FAILURES as exc:  # progress is a courtesy: it never fails the question
            log.warning("progress update failed: %s", exc)

    def answer(self, answer: Answer) -> None:
        chunks = format_for_slack(answer.markdown) or format_for_slack(texts.EMPTY_ANSWER)
        try:
            self._show(chunks, closing=[feedback_block(self.question_id)])
            self._finish(FAILED if answer.cut_off else ANSWERED)  # ✅ only for a whole answer
        except SLACK_FAILURES as exc:
            raise delivery_failed("answer", exc) from exc

    def failed(self, message: str) -> None:
        try:
            self._show(format_for_slack(message), closing=[])
            self._finish(FAILED)
        except SLACK_FAILURES as exc:
            raise delivery_failed("apology", exc) from exc

    # --- internals --------------------------------------------------------------------------

    def _placeholder_ts(self) -> str | None:
        if self._placeholder is None:
            try:
                raw = self.redis.get(self.key)
            except RedisError:
                raw = None
            self._placeholder = raw.decode() if isinstance(raw, bytes) else raw
        return self._placeholder

    def _post_placeholder(self, text: str) -> None:
        """Post the placeholder and record it with a claim: the adapter's waiting notice and a
        worker's placeholder posted at once end as one message (the one recorded first)."""
        ts = post_message(client=self.client, channel=self.target.channel, thread_ts=self.thread, text=text)
        try:
            mine = claim(self.redis, self.key, ts, self.record_seconds)
        except RedisError:
            log.warning("could not remember the Slack placeholder of %s", self.key)
            self._placeholder = ts
            return
        if mine:
            self._placeholder = ts
            return
        self._placeholder = None
        self.client.chat_delete(channel=self.target.channel, ts=ts)  # the other one stays
        recorded = self._placeholder_ts()
        if recorded is not None:
            update_message(client=self.client, channel=self.target.channel, ts=recorded, text=text)

    def _shows_waiting(self) -> bool:
        return is_waiting_notice(self.redis, self.question_id)

    def _remember(self, ts: str) -> None:
        self._placeholder = ts
        try:
            self.redis.set(self.key, ts, ex=self.record_seconds)
        except RedisError:
            log.warning("could not remember the Slack placeholder of %s", self.key)

    def _chunk_ts(self) -> dict[int, str]:
        try:
            raw = self.redis.hgetall(self.chunks_key)
        except RedisError:
            return {}
        return {int(k): v.decode() for k, v in raw.items()}

    def _remember_chunk(self, number: int, ts: str) -> None:
        try:
            pipe = self.redis.pipeline()
            pipe.hset(self.chunks_key, str(number), ts)
            pipe.expire(self.chunks_key, self.record_seconds)
            pipe.execute()
        except RedisError:
            log.warning("could not remember chunk %d of %s", number, self.chunks_key)

    def _show(self, chunks: list[str], closing: Blocks | None = None) -> None:
        """Each chunk in its recorded message (the first in the placeholder), updated; a chunk
        with no message yet, or whose message was deleted, is posted and recorded at once.
        With `closing` (a final message), each message's text is also given as blocks, so it
        replaces whatever the message showed (a stream's text and task cards), and the last
        one ends with the `closing` blocks (the feedback buttons)."""
        channel = self.target.channel
        known = self._chunk_ts() if len(chunks) > 1 else {}
        for number, chunk in enumerate(chunks):
            blocks = None
            if closing is not None:
                blocks = text_blocks(chunk) + (closing if number == len(chunks) - 1 else [])
            ts = self._placeholder_ts() if number == 0 else known.get(number)
            if ts is not None:
                try:
                    update_message(client=self.client, channel=channel, ts=ts, text=chunk, blocks=blocks)
                    continue
                except SlackApiError as exc:
                    if exc.response.get("error") not in _GONE_ERRORS:
                        raise
            ts = post_message(
                client=self.client, channel=channel, thread_ts=self.thread, text=chunk, blocks=blocks
            )
            if number == 0:
                self._remember(ts)
            else:
                self._remember_chunk(number, ts)

    def _finish(self, reaction: str) -> None:
        """👀 off, ✅ or ⚠️ on. Slack failing for a while fails the delivery (tried again
        later); a refusal that would never change (missing scope, message deleted) does not."""
        channel, message = self.target.channel, self.target.message
        if not message:
            return
        for call, name in ((self.client.reactions_remove, RECEIVED), (self.client.reactions_add, reaction)):
            try:
                call(channel=channel, timestamp=message, name=name)
            except SLACK_FAILURES as exc:
                if is_transient(exc):
                    raise
                if isinstance(exc, SlackApiError) and exc.response.get("error") in _HARMLESS_REACTION_ERRORS:
                    continue
                log.warning("reaction %s on the question failed: %s", name, exc)
