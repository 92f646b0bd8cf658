"""Slack answers that stream: text as the model writes it, tool calls as task cards, loading
states, and the verified Sources with the feedback buttons at the end.

`SlackStreamSink` is the worker's Slack sink (worker/jobs/sink.py, worker/jobs/live.py). For
a question it can stream, it posts no placeholder: it reacts 👀 and hands the job a live view,
`SlackLiveView`, whose sender thread does every Web API call, so Slack's latency and rate limits
never slow the model down:

- `assistant.threads.setStatus` shows a loading state while the model thinks (cleared at the end);
- the first thing to show opens the stream, `chat.startStream` in the question's thread, with
  the asker as `recipient_user_id`/`recipient_team_id` (required outside DMs), always with
  `chunks` (a stream keeps the shape it was opened with): a `task_update` per tool call
  (in_progress, then complete or error) and `markdown_text` for the answer;
- text goes out at most every `slack_stream_interval_seconds` (chat.appendStream is Tier 4 for
  the whole workspace): what arrives meanwhile waits in the next call. It is the LiveText's
  stable part (worker/agent/live_text.py: redacted and citation-checked on a held-back window)
  made inert like a post (bot/slack/format.safe_markdown). Text that no longer extends what was
  sent (a redaction or a check changed its mind) stops being shown for that turn;
- `answer()` ends the stream with `chat.stopStream`: the rest of the answer, its Sources, and
  the feedback block, when what streamed is the start of the stored answer. Otherwise (a
  preamble, a retried turn, a cut-off, an answer too long for one message, an outage) the
  stored answer replaces the streamed message (SlackSink._show: the stream is stopped, then
  the message updated), so what the asker ends with is always the stored, verified answer, once.

Where Slack refuses the streaming methods with a code that means "not here" (the workspace does
not know them, the channel type takes none), the view falls back by itself to the placeholder
and progress lines of `SlackSink`, and the refusal is remembered in Redis for the workspace (or
the channel) for `slack_stream_refusal_memory_seconds`.
"""

from __future__ import annotations

import contextlib
import logging

from redis import Redis
from redis.exceptions import RedisError

from bot.slack.format import feedback_block
from bot.slack.live_view import SlackLiveView
from bot.slack.sink import (
    ANSWERED,
    FAILED,
    RECEIVED,
    SLACK_FAILURES,
    SlackSink,
    add_reaction,
    delivery_failed,
)
from config.settings import Settings
from worker.agent.live_text import LiveText
from worker.jobs.live import LiveView
from worker.jobs.question import Question
from worker.jobs.sink import Answer
from worker.ops.claims import claim

log = logging.getLogger("codebot.slack.stream")

REFUSED_KEY_PREFIX = "codebot:slack:nostream:"  # + team (+ ":" + channel) -> the refusal's code
# Refusals that mean the workspace cannot stream at all (an older or restricted Slack) ...
TEAM_REFUSALS = {"unknown_method", "not_allowed_token_type", "method_deprecated", "feature_not_enabled"}
# ... or that this channel cannot (chat.startStream's documented errors)
CHANNEL_REFUSALS = {
    "channel_type_not_supported",
    "restricted_action",
    "restricted_action_non_threadable_channel",
    "restricted_action_thread_only_channel",
    "messages_tab_disabled",
}


def refusal_keys(team: str | None, channel: str) -> tuple[str, str]:
    return REFUSED_KEY_PREFIX + (team or "-"), REFUSED_KEY_PREFIX + f"{team or '-'}:{channel}"


class SlackStreamSink(SlackSink):
    """SlackSink that streams when it can (the module's docstring says how)."""

    def __init__(self, settings: Settings, redis: Redis, question: Question) -> None:
        super().__init__(settings, redis, question)
        self.asker = question.asker
        self.view: SlackLiveView | None = None

    def can_stream(self) -> bool:
        t = self.target
        if not (self.settings.slack_streaming and t.message) or not (t.is_dm or (t.team and self.asker)):
            return False
        try:
            if self._placeholder_ts() is not None:  # an earlier run posted one: answer in it
                return False
            return not any(self.redis.exists(key) for key in refusal_keys(t.team, t.channel))
        except RedisError:
            return False

    def remember_refusal(self, error: str) -> bool:
        """Remember a refusal of the streaming methods that means "not here" (the workspace's
        or the channel's), so the next questions take progress edits at once; False for an error
        that says nothing of the kind."""
        team_key, channel_key = refusal_keys(self.target.team, self.target.channel)
        if error not in TEAM_REFUSALS and error not in CHANNEL_REFUSALS:
            return False
        key = team_key if error in TEAM_REFUSALS else channel_key
        log.warning("slack: streaming refused (%s): answering with progress edits in %s", error, key)
        with contextlib.suppress(RedisError):
            self.redis.set(key, error, ex=int(self.settings.slack_stream_refusal_memory_seconds))
        return True

    def claim_stream(self, ts: str) -> bool:
        """Record the stream's message as the question's first message, unless a run of the
        same question recorded another meanwhile. A token claim with the message's own ts as
        the token: redis-py's retry after a stall finds its own first try and stays the taker
        (worker/ops/claims.py), instead of deleting the stream it had just recorded."""
        try:
            claimed = claim(self.redis, self.key, ts, self.record_seconds)
        except RedisError:
            claimed = True  # not recorded: a later delivery posts anew rather than lose the answer
        if claimed:
            self._placeholder = ts
        return claimed

    # --- ReplySink ---------------------------------------------------------------------------
    def received(self) -> None:
        if not self.can_stream():
            super().received()  # its placeholder is what progress lines edit
            return
        add_reaction(client=self.client, channel=self.target.channel, ts=self.target.message, name=RECEIVED)

    def progress(self, text: str) -> None:
        if self.view is not None and self.view.streaming:
            return  # the stream shows the work as task cards
        super().progress(text)

    def live(self, text: LiveText) -> LiveView | None:
        if not self.can_stream():
            return None
        self.view = SlackLiveView(self, text)
        return self.view

    def answer(self, answer: Answer) -> None:
        view = self.view
        if view is not None:
            view.close()
            rest = view.rest_of(answer)
            if rest is not None:
                try:
                    view.finish(rest, [feedback_block(self.question_id)])
                    self._finish(FAILED if answer.cut_off else ANSWERED)
                except SLACK_FAILURES as exc:
                    raise delivery_failed("answer", exc) from exc
                return
            view.end_with_cards()
        super().answer(answer)

    def failed(self, message: str) -> None:
        if self.view is not None:
            self.view.close()
            self.view.end_with_cards()
        super().failed(message)
