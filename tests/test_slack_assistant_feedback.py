"""Slack's AI-app surface around the answer: the side panel's assistant threads (greeting,
suggested prompts, title; a message there answered like a DM, streamed), and the 👍/👎 under
every answer, clicked as Slack sends a click (block_actions) and the 👎 reason modal
(view_submission), stored once per user (worker/jobs/feedback.py)."""

from __future__ import annotations

import pytest

from tests.support.model_server import text, tool_calls
from tests.support.slack_api import message as message_event
from tests.support.slack_api import signed_post
from tests.support.slack_interactions import assistant_thread_started, feedback_click, form, view_submission
from tests.support.slack_rig import SECRET, SlackRig
from worker.jobs import feedback

pytestmark = pytest.mark.rig("slack", slack_streaming=True, slack_stream_interval_seconds=0.05)
READ = ("read_file", {"repo": "payments", "path": "payments/retry.py"})


def click(rig: SlackRig, payload: dict[str, object]) -> int:
    body = form(payload)
    status = signed_post(rig.events_url, body, SECRET, content_type="application/x-www-form-urlencoded")[0]
    rig.settle()
    return status


def answered(rig: SlackRig) -> tuple[str, str]:
    """A question answered in C1: (its ts, the question id)."""
    rig.model.enqueue(tool_calls(READ), text("It retries 5 times [payments:payments/retry.py#L3]."))
    ts = rig.mention("how does retry work?")
    rig.settle()
    rig.work()
    return ts, f"q-slack-C1-{ts.replace('.', '_')}"


def test_opening_an_assistant_thread_greets_with_prompts_for_the_repos_open_there(rig: SlackRig) -> None:
    thread = rig.next_ts()
    assert rig.send(assistant_thread_started("U1", "D1", thread, context_channel="C1")) == 200
    rig.settle()
    (greeting,) = rig.api.thread_texts("D1", thread)
    assert "`payments`" in greeting and "`internal`" not in greeting  # internal is for one channel only
    (prompts,) = rig.api.surfaces.prompts
    messages = [p["message"] for p in prompts["prompts"]]
    assert any("repo:payments" in m for m in messages) and not any("internal" in m for m in messages)
    assert rig.api.surfaces.titles == [("D1", thread, "Questions about the code")]


def test_a_question_in_an_assistant_thread_is_answered_there_streamed_without_recipients(
    rig: SlackRig,
) -> None:
    thread = rig.next_ts()
    rig.send(assistant_thread_started("U1", "D1", thread))
    rig.settle()
    rig.model.enqueue(tool_calls(READ), text("It retries 5 times [payments:payments/retry.py#L3]."))
    asked = rig.next_ts()
    assert rig.send(message_event("D1", asked, "how does retry work?", thread_ts=thread, channel_type="im")) == 200
    rig.settle()
    rig.work()
    (start,) = rig.api.calls_to("chat.startStream")
    assert start.body["channel"] == "D1" and start.body["thread_ts"] == thread
    assert "recipient_user_id" not in start.body  # a DM needs none
    assert "retries 5 times" in rig.api.thread_texts("D1", thread)[-1]


def test_a_thumbs_up_is_stored_once_however_often_it_is_clicked(rig: SlackRig) -> None:
    ts, question_id = answered(rig)
    (message,) = rig.api.thread_messages("C1", ts)
    for _click in range(2):
        assert click(rig, feedback_click(message, positive=True, user="U7")) == 200
    (vote,) = feedback.votes_of(rig.redis, question_id)
    assert (vote.user, vote.vote) == ("U7", "up") and rig.api.surfaces.views == []
    assert feedback.tally(rig.redis, since=0).up == 1


def test_a_thumbs_down_replaces_the_vote_and_its_reason_is_asked_in_a_modal(rig: SlackRig) -> None:
    ts, question_id = answered(rig)
    (message,) = rig.api.thread_messages("C1", ts)
    click(rig, feedback_click(message, positive=True, user="U7"))
    click(rig, feedback_click(message, positive=False, user="U7"))
    (opened,) = rig.api.surfaces.views
    assert opened["view"]["private_metadata"] == question_id
    status = click(rig, view_submission(opened["view"], {"reason_text": "It missed the jitter."}, user="U7"))
    assert status == 200
    (vote,) = feedback.votes_of(rig.redis, question_id)
    assert (vote.vote, vote.reason) == ("down", "It missed the jitter.")
    assert (feedback.tally(rig.redis, since=0).up, feedback.tally(rig.redis, since=0).down) == (0, 1)


def test_a_feedback_click_with_a_forged_value_changes_nothing(rig: SlackRig) -> None:
    ts, question_id = answered(rig)
    (message,) = rig.api.thread_messages("C1", ts)
    payload = feedback_click(message, positive=True)
    payload["actions"][0]["value"] = "maybe:q-nothing"  # type: ignore[index]
    assert click(rig, payload) == 200
    assert feedback.votes_of(rig.redis, question_id) == [] and feedback.recent_question_ids(rig.redis) == []
