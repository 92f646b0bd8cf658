"""The Slack adapter over real signed HTTP: verification, dedupe, triggers and refusals."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from rq.job import Job

from tests.support.slack_api import BOT_USER_ID, event_body, mention, message, signed_post
from tests.support.slack_rig import SECRET, SECRET_CHANNEL, SlackRig, build_slack_rig
from worker.jobs.question import Question

pytestmark = pytest.mark.rig("slack")


def test_a_request_with_a_bad_signature_is_refused_and_nothing_is_enqueued(rig: SlackRig) -> None:
    body = event_body(mention("C1", rig.next_ts(), "how does retry work?"))
    status, _, _ = signed_post(rig.events_url, body, "not-the-secret")
    rig.settle()
    assert status == 401
    assert rig.question_jobs() == []
    assert rig.api.calls_to("chat.postMessage") == []


def test_a_request_signed_more_than_five_minutes_ago_is_refused(rig: SlackRig) -> None:
    body = event_body(mention("C1", rig.next_ts(), "how does retry work?"))
    status, _, _ = signed_post(rig.events_url, body, SECRET, timestamp=int(time.time()) - 301)
    rig.settle()
    assert status == 401
    assert rig.question_jobs() == []


def test_a_mention_is_acked_at_once_enqueued_and_marked_received(rig: SlackRig) -> None:
    ts = rig.next_ts()
    status, _, _ = signed_post(rig.events_url, event_body(mention("C1", ts, "how does retry work?")), SECRET)
    rig.settle()
    # acked while the question is only queued (no worker runs here): the answer is not awaited;
    # bench/slack_ack.py measures how fast (Slack's limit is 3 s)
    assert status == 200
    assert rig.question_jobs() == [f"q-slack-C1-{ts.replace('.', '_')}"]
    assert rig.api.reactions("C1", ts) == ["eyes"]


def test_a_retried_delivery_makes_one_job(rig: SlackRig) -> None:
    event = mention("C1", rig.next_ts(), "how does retry work?")
    assert rig.send(event) == 200
    for attempt in ("1", "2", "3"):
        headers = {"X-Slack-Retry-Num": attempt, "X-Slack-Retry-Reason": "http_timeout"}
        assert rig.send(event, headers=headers) == 200
    rig.settle()
    assert len(rig.question_jobs()) == 1
    assert len(rig.api.calls_to("reactions.add")) == 1


def test_the_same_message_as_app_mention_and_message_makes_one_job(rig: SlackRig) -> None:
    ts = rig.next_ts()
    text = f"<@{BOT_USER_ID}> where is the retry limit set?"
    statuses = [
        rig.send(mention("C1", ts, "where is the retry limit set?")),
        rig.send(message("C1", ts, text)),
    ]
    rig.settle()
    assert statuses == [200, 200]
    assert len(rig.question_jobs()) == 1


def test_a_mention_with_no_question_gets_a_short_help_reply_in_its_thread(rig: SlackRig) -> None:
    ts = rig.mention("   ")
    rig.settle()
    (reply,) = rig.api.thread_texts("C1", ts)
    assert reply.startswith("You mentioned me without a question")
    assert "/codebot repos" in reply
    assert rig.question_jobs() == []


def test_a_mention_saying_only_help_gets_the_help_in_its_thread_and_nothing_is_queued(rig: SlackRig) -> None:
    ts = rig.mention("help!")
    rig.settle()
    (reply,) = rig.api.thread_texts("C1", ts)
    assert reply.startswith("Ask me about the code") and "/codebot repos" in reply
    assert rig.question_jobs() == []


def test_an_unknown_repo_gets_the_list_of_repos_nearest_first(rig: SlackRig) -> None:
    ts = rig.mention("how does retry work in repo:paymnts?")
    rig.settle()
    (reply,) = rig.api.thread_texts("C1", ts)
    assert "There is no repo `paymnts`" in reply
    assert reply.index("`payments`") < reply.index("`web-frontend`")
    assert "internal" not in reply  # a repo this channel may not see is not even named
    assert rig.question_jobs() == []


def test_a_repo_not_allowed_in_the_channel_is_refused_without_its_content(rig: SlackRig) -> None:
    ts = rig.mention("what are the plans? repo:internal", channel="COTHER")
    rig.settle()
    (reply,) = rig.api.thread_texts("COTHER", ts)
    assert reply.startswith(
        "There is no repo `internal`. Repos you can ask about here: "
    )  # as if it did not exist
    assert rig.question_jobs() == []
    allowed = rig.mention("what are the plans? repo:internal", channel=SECRET_CHANNEL)
    rig.settle()
    assert rig.api.thread_texts(SECRET_CHANNEL, allowed) == []
    assert len(rig.question_jobs()) == 1


def test_a_direct_message_is_a_question_and_sees_only_repos_open_to_every_channel(rig: SlackRig) -> None:
    ts = rig.next_ts()
    rig.send(message("D1", ts, "how does retry work?", channel_type="im"))
    refused = rig.next_ts()
    rig.send(message("D1", refused, "plans? repo:internal", channel_type="im"))
    rig.settle()
    assert len(rig.question_jobs()) == 1
    (reply,) = rig.api.thread_texts("D1", refused)
    assert reply.startswith("There is no repo `internal`. Repos you can ask about here: ")


def test_bots_edits_deletions_and_plain_channel_chatter_are_ignored(rig: SlackRig) -> None:
    events = [
        message("C1", rig.next_ts(), f"<@{BOT_USER_ID}> hi from a bot", bot_id="B999"),
        message("C1", rig.next_ts(), "edited", subtype="message_changed"),
        message("C1", rig.next_ts(), "", subtype="message_deleted"),
        message("C1", rig.next_ts(), "lunch anyone?"),
        {"type": "reaction_added", "user": "U1", "reaction": "eyes", "item": {}, "event_ts": "1.2"},
    ]
    statuses = [rig.send(event) for event in events]
    rig.settle()
    assert statuses == [200] * len(events)  # acked, so Slack never retries them
    assert rig.question_jobs() == []
    assert rig.api.calls_to("chat.postMessage") == []


def test_a_user_over_the_rate_limit_is_told_when_to_retry(tmp_path: Path) -> None:
    for rig in build_slack_rig(tmp_path, rate_limit_questions=2, rate_limit_window_seconds=60):
        asked = [rig.mention(f"question {n}?") for n in range(3)]
        rig.settle()
        assert len(rig.question_jobs()) == 2
        (reply,) = [text for ts in asked for text in rig.api.thread_texts("C1", ts)]
        assert reply.startswith("You're asking faster than I can answer. Please try again in")
        assert reply.endswith(" s.") and 55 <= int(reply.split()[-2]) <= 60
        rig.mention("another user's question?", user="U2")
        rig.settle()
        assert len(rig.question_jobs()) == 3


def test_a_full_queue_turns_new_questions_away_politely(tmp_path: Path) -> None:
    for rig in build_slack_rig(tmp_path, queue_max_depth=1):
        rig.mention("first?")
        rig.settle()
        ts = rig.mention("second?", user="U2")
        rig.settle()
        assert len(rig.question_jobs()) == 1
        (reply,) = rig.api.thread_texts("C1", ts)
        assert reply.startswith("I'm busy with 1 questions right now. Please try again")


def test_a_follow_up_without_repo_keeps_the_scope_its_thread_started_with(rig: SlackRig) -> None:
    root = rig.mention("how does retry work? repo:payments")
    follow_up = rig.next_ts()
    rig.settle()
    rig.send(message("C1", follow_up, "and the backoff?", thread_ts=root))
    rig.settle()
    job = Job.fetch(f"q-slack-C1-{follow_up.replace('.', '_')}", connection=rig.redis)
    question = Question.model_validate_json(job.args[0])
    assert question.repos == ["payments"]
    assert question.text == "and the backoff?"
    assert (question.target.thread, question.target.message) == (root, follow_up)
