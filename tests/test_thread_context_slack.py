"""The thread is the context: a question asked in a Slack thread brings the thread's earlier
messages (conversations.replies on the fake Slack, read by the real worker) to the model."""

from __future__ import annotations

import logging

import pytest

from tests.support.answers import body
from tests.support.model_server import text, tool_calls
from tests.support.slack_rig import SlackRig

pytestmark = pytest.mark.rig("slack")
READ_RETRY = ("read_file", {"repo": "payments", "path": "payments/retry.py", "start_line": 1, "end_line": 13})
TRACE = (
    "Traceback (most recent call last):\n"
    '  File "payments/retry.py", line 9, in retry\n'
    "    raise PaymentDeclined(code)\n"
    "PaymentDeclined: card_expired"
)
TOKEN = "ghp_" + "a1B2" * 9


def first_request_text(rig: SlackRig) -> str:
    return str(rig.model.requests[0]["messages"])


def ask_in(rig: SlackRig, root: str, question: str, channel: str = "C1") -> str:
    rig.model.enqueue(tool_calls(READ_RETRY), text("It is the retry's last attempt."))
    ts = rig.mention(question, channel=channel, thread_ts=root)
    rig.settle()
    rig.work()
    return ts


def test_a_stack_trace_in_the_thread_root_reaches_the_models_first_request(rig: SlackRig) -> None:
    rig.api.users.update({"U7": "Dana Ops", "U8": "Lee"})
    root = rig.api.seed_thread(
        "C1",
        [{"user": "U7", "text": f"prod is failing:\n```{TRACE}```"}, {"user": "U8", "text": "seen it twice"}],
    )
    ask_in(rig, root, "what raises this?")
    first = rig.model.requests[0]["messages"][-1]["content"]
    assert "PaymentDeclined: card_expired" in first and "--- Dana Ops:" in first and "--- Lee:" in first
    assert first.index("Dana Ops") < first.index("Lee") < first.index("what raises this?")
    (reply,) = rig.api.thread_texts("C1", root)
    assert body(reply) == "It is the retry's last attempt."


def test_a_token_pasted_in_the_thread_never_reaches_the_model_the_log_or_the_stored_record(
    rig: SlackRig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)  # (slack_sdk's DEBUG lines dump whole bodies: never on in production)
    root = rig.api.seed_thread("C1", [{"user": "U7", "text": f"deploy broke, my token is {TOKEN} fyi"}])
    ask_in(rig, root, "why did the deploy break?")
    assert "deploy broke" in first_request_text(rig)
    assert TOKEN not in str(rig.model.requests) and "a1B2a1B2" not in str(rig.model.requests)
    assert "a1B2a1B2" not in caplog.text
    stored = [rig.redis.dump(key) or b"" for key in rig.redis.keys("*")]
    assert stored and not any(b"a1B2a1B2" in value for value in stored)


def test_a_thread_of_500_messages_sends_its_root_and_newest_within_the_budget_with_a_note(
    rig: SlackRig,
) -> None:
    messages = [{"user": "U7", "text": "ROOT: checkout times out"}]
    messages += [{"user": "U8", "text": f"reply number {n:03d}"} for n in range(1, 500)]
    root = rig.api.seed_thread("C1", messages)
    ask_in(rig, root, "so what times out?")
    first = rig.model.requests[0]["messages"][-1]["content"]
    assert "ROOT: checkout times out" in first and "reply number 499" in first
    assert "reply number 001" not in first
    assert "450 earlier message(s) of this thread were left out" in first  # root + the 49 newest kept
    assert len(rig.api.calls_to("conversations.replies")) == 3  # pages of 200
    (reply,) = rig.api.thread_texts("C1", root)
    assert reply.startswith("_This thread is long: I read its first message and the newest 49; 450 earlier")


def test_a_thread_with_the_same_ts_in_another_channel_stays_unseen(rig: SlackRig) -> None:
    root = rig.api.seed_thread("C2", [{"user": "U7", "text": "C2 SECRET PLANS"}])
    ask_in(rig, root, "what is in this thread?", channel="C1")
    assert "C2 SECRET PLANS" not in str(rig.model.requests)
    assert {call.body["channel"] for call in rig.api.calls_to("conversations.replies")} == {"C1"}


def test_a_deleted_root_is_shown_to_the_model_as_deleted(rig: SlackRig) -> None:
    root = rig.api.seed_thread(
        "C1",
        [
            {
                "user": "USLACKBOT",
                "subtype": "tombstone",
                "hidden": True,
                "text": "This message was deleted.",
            },
            {"user": "U8", "text": "the error was in refunds"},
        ],
    )
    ask_in(rig, root, "where was the error?")
    first = rig.model.requests[0]["messages"][-1]["content"]
    assert "[this message was deleted]" in first and "the error was in refunds" in first


def test_a_thread_that_cannot_be_read_still_gets_its_question_answered_with_a_line_saying_so(
    rig: SlackRig, caplog: pytest.LogCaptureFixture
) -> None:
    root = rig.api.seed_thread("C1", [{"user": "U7", "text": "a trace"}])
    rig.api.fail("conversations.replies", "missing_scope")
    ask_in(rig, root, "what broke?")
    (reply,) = rig.api.thread_texts("C1", root)
    assert reply.startswith("_I could not read the earlier messages of this thread")
    assert body(reply).endswith("It is the retry's last attempt.")
    assert "could not be read" in rig.model.requests[0]["messages"][-1]["content"]
    assert "Traceback" not in caplog.text and "missing_scope" in caplog.text


def test_mentions_broadcasts_and_links_in_the_thread_reach_the_model_as_plain_words(rig: SlackRig) -> None:
    root = rig.api.seed_thread(
        "C1",
        [{"user": "U7", "text": "<!channel> deploy failed, <@U9> see <https://evil.example/x|the runbook>"}],
    )
    ask_in(rig, root, "what failed?")
    first = rig.model.requests[0]["messages"][-1]["content"]
    assert "@channel deploy failed, @U9 see the runbook (https://evil.example/x)" in first
    assert "<!channel>" not in first and "<@U9>" not in first
