"""Slack's AI-app surface around the answer: the side panel's assistant threads (greeting,
suggested prompts, title; a message there answered like a DM, streamed), and the 👍/👎 under
every answer, clicked as Slack sends a click (block_actions) and the 👎 reason modal
(view_submission), stored once per user (worker/jobs/feedback.py)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from rich.console import Console

from tests.support.metrics import metric_value, samples
from tests.support.model_server import text, tool_calls
from tests.support.slack_api import message as message_event
from tests.support.slack_api import signed_post
from tests.support.slack_interactions import assistant_thread_started, feedback_click, form, view_submission
from tests.support.slack_rig import SECRET, SlackRig
from worker.jobs import feedback
from worker.jobs.admin import status_report
from worker.jobs.evaluate import run_eval
from worker.jobs.feedback_cli import run_export, run_list
from worker.jobs.queue import queue_depth
from worker.ops.metrics import exposition

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
    assert (
        rig.send(message_event("D1", asked, "how does retry work?", thread_ts=thread, channel_type="im"))
        == 200
    )
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


def test_feedback_round_trips_through_export_into_codebot_eval(rig: SlackRig, tmp_path: Path) -> None:
    liked_ts, _liked = answered(rig)
    rig.model.enqueue(tool_calls(READ), text("It never retries [payments:payments/retry.py#L13]."))
    disliked_ts = rig.mention("does it ever give up?")
    rig.settle()
    rig.work()
    click(rig, feedback_click(rig.api.thread_messages("C1", liked_ts)[0], positive=True))
    click(rig, feedback_click(rig.api.thread_messages("C1", disliked_ts)[0], positive=False))
    (opened,) = rig.api.surfaces.views
    click(rig, view_submission(opened["view"], {"reason_text": "It does give up."}))
    exported = tmp_path / "feedback.jsonl"
    assert run_export(rig.redis, str(exported), Console(record=True)) == 0
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    assert rows[0]["question"] == "how does retry work?" and rows[0]["expected_files"] == [
        "payments/retry.py"
    ]
    assert rows[1]["flagged"] and rows[1]["rejected_files"] == ["payments/retry.py"]
    assert rows[1]["reasons"] == ["It does give up."] and "expected_files" not in rows[1]

    rig.model.set_handler(
        lambda body: (
            text("See [payments:payments/retry.py#L3].") if len(body["messages"]) > 3 else tool_calls(READ)
        )
    )
    out = Console(record=True, width=200)
    assert run_eval(rig.settings, str(exported), str(tmp_path / "eval.csv"), out) == 0
    printed = out.export_text()
    assert "codebot eval: 2 questions" in printed and "👎" in printed
    assert "1 question(s) users flagged 👎: 1 of the new answers cite again" in printed
    table = list(csv.DictReader((tmp_path / "eval.csv").open(encoding="utf-8")))
    assert [(r["flagged"], r["expected_files_cited"]) for r in table] == [("False", "1.0"), ("True", "1.0")]


def test_status_shows_admins_the_thumbs_up_rate(rig: SlackRig) -> None:
    ts, _question_id = answered(rig)
    (message,) = rig.api.thread_messages("C1", ts)
    for user, positive in (("U1", True), ("U2", True), ("U3", False), ("U4", True)):
        click(rig, feedback_click(message, positive=positive, user=user))
    assert "Feedback in the last 30 days: 3 👍, 1 👎 (75% 👍)" in status_report(rig.redis, rig.runtime)
    assert metric_value(samples(exposition(rig.redis, queue_depth).decode()), "codebot_feedback_total") == 4


def test_a_vote_naming_an_answer_in_another_channel_or_none_at_all_is_not_stored(rig: SlackRig) -> None:
    ts, question_id = answered(rig)
    (message,) = rig.api.thread_messages("C1", ts)
    elsewhere = feedback_click(message, positive=False, user="U9")
    elsewhere["channel"] = {"id": "C2", "name": "random"}  # clicked under a message in C2
    elsewhere["container"]["channel_id"] = "C2"  # type: ignore[index]
    unknown = feedback_click(message, positive=False, user="U9")
    unknown["actions"][0]["value"] = "down:q-slack-C1-999_1"  # type: ignore[index]
    assert click(rig, elsewhere) == 200 and click(rig, unknown) == 200
    assert feedback.votes_of(rig.redis, question_id) == [] and feedback.recent_question_ids(rig.redis) == []
    assert feedback.votes_of(rig.redis, "q-slack-C1-999_1") == [] and rig.api.surfaces.views == []
    click(rig, feedback_click(message, positive=True, user="U9"))  # the real click still counts
    assert [(v.user, v.vote) for v in feedback.votes_of(rig.redis, question_id)] == [("U9", "up")]


def test_feedback_list_shows_hostile_question_and_reason_text_literally(rig: SlackRig) -> None:
    rig.model.enqueue(tool_calls(READ), text("It retries 5 times [payments:payments/retry.py#L3]."))
    ts = rig.mention("why [link=https://evil.example]this[/link] [/bold]?")
    rig.settle()
    rig.work()
    click(rig, feedback_click(rig.api.thread_messages("C1", ts)[0], positive=False))
    (opened,) = rig.api.surfaces.views
    click(rig, view_submission(opened["view"], {"reason_text": "[/x] [red]wrong[/red]"}))
    out = Console(record=True, width=300)
    assert run_list(rig.redis, 20, out) == 0
    shown = out.export_text()
    assert "[link=https://evil.example]this[/link] [/bold]" in shown and "[/x] [red]wrong[/red]" in shown
