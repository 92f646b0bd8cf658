"""👍/👎 on Slack answers: the feedback block under each answer, and what a click does.

An answer's last message ends with a `context_actions` block holding Slack's
`feedback_buttons` element (docs.slack.dev, "Feedback buttons element"); each button's value is
`up:<question id>` or `down:<question id>`. A click arrives as a `block_actions` payload: the
vote is stored (worker/jobs/feedback.py: one per user, a second click on the same button counts
once, the other button replaces it). A 👎 also opens a modal asking, optionally, why; its
`view_submission` carries the question id in `private_metadata` and attaches the reason.
Interactivity must be on in the app's settings (config/slack-manifest.yml).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from redis import Redis
from slack_sdk import WebClient

from bot import texts
from bot.intake import REDIS_DOWN
from bot.slack.format import FEEDBACK_ACTION_ID as ACTION_ID
from bot.slack.sink import SLACK_FAILURES
from config.settings import Settings
from worker.jobs import feedback

log = logging.getLogger("codebot.slack.feedback")


__all__ = ["ACTION_ID", "REASON_CALLBACK_ID", "SlackFeedback", "parse_vote", "reason_modal"]
REASON_CALLBACK_ID = "codebot_feedback_reason"
REASON_BLOCK_ID = "reason"
REASON_ACTION_ID = "reason_text"
REASON_MAX_CHARS = 1000


def reason_modal(question_id: str) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": REASON_CALLBACK_ID,
        "private_metadata": question_id,
        "title": {"type": "plain_text", "text": texts.FEEDBACK_MODAL_TITLE},
        "submit": {"type": "plain_text", "text": texts.FEEDBACK_MODAL_SUBMIT},
        "close": {"type": "plain_text", "text": texts.FEEDBACK_MODAL_CLOSE},
        "blocks": [
            {
                "type": "input",
                "block_id": REASON_BLOCK_ID,
                "optional": True,
                "label": {"type": "plain_text", "text": texts.FEEDBACK_MODAL_LABEL},
                "element": {
                    "type": "plain_text_input",
                    "action_id": REASON_ACTION_ID,
                    "multiline": True,
                    "max_length": REASON_MAX_CHARS,
                },
            }
        ],
    }


def parse_vote(value: str) -> tuple[feedback.Vote, str] | None:
    """`up:<question id>` -> ("up", question id); None for anything else."""
    vote, _, question_id = value.partition(":")
    if vote not in feedback.VOTES or not question_id.startswith("q-"):
        return None
    return vote, question_id


class SlackFeedback:
    """Bolt listeners for the feedback buttons and the reason modal."""

    def __init__(self, settings: Settings, redis: Callable[[], Redis]) -> None:
        self.settings = settings
        self.redis = redis

    def on_click(self, ack: Callable[..., None], body: dict[str, Any], client: WebClient) -> None:
        ack()
        action = (body.get("actions") or [{}])[0]
        parsed = parse_vote(str(action.get("value") or ""))
        user = str((body.get("user") or {}).get("id") or "")
        channel = str(
            (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id") or ""
        )
        if parsed is None or not user:
            log.info("slack: ignored a feedback click with value %r", action.get("value"))
            return
        vote, question_id = parsed
        try:
            recorded = feedback.record_vote(
                self.redis(), self.settings, question_id, "slack", user, vote, channel
            )
        except REDIS_DOWN as exc:
            log.warning("slack: feedback on %s not stored (Redis: %s)", question_id, exc)
            return
        log.info("slack: %s vote %s on %s by %s in %s", recorded, vote, question_id, user, channel)
        if recorded == "refused":
            return
        if vote == "down" and body.get("trigger_id"):
            try:
                client.views_open(trigger_id=body["trigger_id"], view=reason_modal(question_id))
            except SLACK_FAILURES as exc:  # the vote counts without a reason
                log.warning("slack: the feedback reason modal did not open: %s", exc)

    def on_reason(self, ack: Callable[..., None], body: dict[str, Any]) -> None:
        ack()
        view = body.get("view") or {}
        question_id = str(view.get("private_metadata") or "")
        user = str((body.get("user") or {}).get("id") or "")
        values = ((view.get("state") or {}).get("values") or {}).get(REASON_BLOCK_ID) or {}
        reason = str((values.get(REASON_ACTION_ID) or {}).get("value") or "")
        if not (question_id.startswith("q-") and user and reason.strip()):
            return
        try:
            feedback.record_reason(self.redis(), self.settings, question_id, user, reason)
        except REDIS_DOWN as exc:
            log.warning("slack: feedback reason on %s not stored (Redis: %s)", question_id, exc)
