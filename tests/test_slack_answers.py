"""End to end: a mention through the real adapter, a real burst worker, the scripted model,
and the answer as the user sees it in the fake Slack."""

from __future__ import annotations

import time

import pytest
from slack_sdk import WebClient

from bot.slack.format import SLACK_TEXT_LIMIT_CHARS
from bot.slack.sink import SlackSink
from tests.support.answers import body
from tests.support.model_server import last_user_text, text, tool_calls
from tests.support.slack_api import message
from tests.support.slack_rig import SlackRig
from worker.jobs.question import Question, ReplyTarget
from worker.jobs.sink import Answer

READ_RETRY = ("read_file", {"repo": "payments", "path": "payments/retry.py", "start_line": 1, "end_line": 13})


pytestmark = pytest.mark.rig("slack")


def test_a_mention_is_answered_in_its_thread_with_commit_links_and_a_check_mark(rig: SlackRig) -> None:
    rig.model.enqueue(tool_calls(READ_RETRY), text("It retries 5 times [payments:payments/retry.py#L3]."))
    ts = rig.mention("how many times does retry try?")
    rig.settle()
    rig.work()
    (reply,) = rig.api.thread_texts("C1", ts)
    link = f"https://github.com/acme/payments/blob/{rig.sha}/payments/retry.py#L3"
    assert f"<{link}|payments:payments/retry.py#L3>" in reply
    assert "*Sources*" in reply
    assert rig.api.reactions("C1", ts) == ["white_check_mark"]
    updates = rig.api.calls_to("chat.update")
    assert any("reading" in call.body["text"] for call in updates[:-1])  # progress shown before the answer


def test_a_follow_up_in_the_thread_carries_the_earlier_question_and_answer(rig: SlackRig) -> None:
    rig.model.enqueue(tool_calls(READ_RETRY), text("It retries 5 times [payments:payments/retry.py#L3]."))
    root = rig.mention("how many times does retry try?")
    rig.settle()
    rig.work()
    rig.model.enqueue(tool_calls(READ_RETRY), text("It sleeps 0.5 s, doubling each time."))
    follow_up = rig.next_ts()
    rig.send(message("C1", follow_up, "and how long does it wait?", thread_ts=root))  # no re-mention
    rig.settle()
    rig.work()
    sent = rig.model.requests[-1]["messages"]
    assert any("how many times does retry try?" in str(m.get("content")) for m in sent)
    assert any("retries 5 times" in str(m.get("content")) for m in sent if m["role"] == "assistant")
    assert last_user_text(rig.model.requests[-1]).endswith("and how long does it wait?")
    assert body(rig.api.thread_texts("C1", root)[-1]) == "It sleeps 0.5 s, doubling each time."


def test_someone_else_replying_in_the_thread_without_a_mention_is_left_alone(rig: SlackRig) -> None:
    rig.model.enqueue(tool_calls(READ_RETRY), text("Five."))
    root = rig.mention("how many attempts?")
    rig.settle()
    rig.work()
    rig.send(message("C1", rig.next_ts(), "nice, thanks bot", user="U2", thread_ts=root))
    rig.send(message("C1", rig.next_ts(), "<@U2> see this?", thread_ts=root))
    rig.settle()
    assert rig.question_jobs() == []


def test_the_asker_posting_a_file_without_words_in_the_thread_gets_no_help_reply(rig: SlackRig) -> None:
    rig.model.enqueue(tool_calls(READ_RETRY), text("Five."))
    root = rig.mention("how many attempts?")
    rig.settle()
    rig.work()
    shot = rig.next_ts()
    rig.send(message("C1", shot, "", thread_ts=root, subtype="file_share", files=[{"id": "F1"}]))
    rig.settle()
    assert list(map(body, rig.api.thread_texts("C1", root))) == ["Five."]
    assert rig.question_jobs() == []


def test_model_output_full_of_broadcasts_and_mentions_is_posted_inert(rig: SlackRig) -> None:
    loud = "<!channel> <!here> <!everyone> <@U123> <!subteam^S1|devs> @here @channel @everyone ```<!here>```"
    rig.model.enqueue(tool_calls(READ_RETRY), text(loud))
    ts = rig.mention("say something loud")
    rig.settle()
    rig.work()
    (reply,) = rig.api.thread_texts("C1", ts)
    assert "<!" not in reply and "<@" not in reply
    for word in ("@here", "@channel", "@everyone"):
        assert word not in reply
    assert "&lt;!channel&gt;" in reply


def test_an_answer_over_40000_characters_is_split_without_breaking_code_blocks(rig: SlackRig) -> None:
    block = "```python\n" + "\n".join(f"value_{i} = compute({i}) & mask" for i in range(300)) + "\n```"
    markdown = "\n\n".join(f"Part {n}: " + "words " * 300 + "\n\n" + block for n in range(4))
    assert len(markdown) > SLACK_TEXT_LIMIT_CHARS
    target = ReplyTarget(platform="slack", channel="C1", thread="1.1", message="1.1")
    sink = SlackSink(
        rig.settings, rig.redis, Question(id="q-long", asker="U1", target=target, text="x", repos=[])
    )
    sink.received()
    sink.answer(Answer(markdown=markdown))
    posted = rig.api.thread_texts("C1", "1.1")
    assert len(posted) >= 12
    assert all(len(part) <= 3500 for part in posted)
    assert all(part.count("```") % 2 == 0 for part in posted)
    assert sum(part.count("value_") for part in posted) == 4 * 300


def test_a_429_from_slack_is_waited_out_as_retry_after_says(rig: SlackRig) -> None:
    target = ReplyTarget(platform="slack", channel="C1", thread="2.2", message="2.2")
    sink = SlackSink(
        rig.settings, rig.redis, Question(id="q-429", asker="U1", target=target, text="x", repos=[])
    )
    sink.received()
    rig.api.rate_limit("chat.update", count=1, retry_after=1)
    started = time.monotonic()
    sink.answer(Answer(markdown="The answer."))
    updates = rig.api.calls_to("chat.update")
    assert len(updates) == 2 and updates[1].at - updates[0].at >= 1.0
    assert time.monotonic() - started >= 1.0
    assert rig.api.thread_texts("C1", "2.2") == ["The answer."]


def test_slack_out_of_reach_during_progress_does_not_fail_the_question(rig: SlackRig) -> None:
    target = ReplyTarget(platform="slack", channel="C1", thread="3.3", message="3.3")
    sink = SlackSink(
        rig.settings, rig.redis, Question(id="q-unreachable", asker="U1", target=target, text="x", repos=[])
    )
    sink.received()
    reachable, sink.client = sink.client, WebClient(token="xoxb-test", base_url="http://127.0.0.1:9/api/")
    sink.progress("reading payments/retry.py")  # connection refused: logged, not raised
    sink.client = reachable
    sink.answer(Answer(markdown="The answer."))
    assert rig.api.thread_texts("C1", "3.3") == ["The answer."]


def test_a_failed_question_ends_with_an_apology_and_a_warning_reaction(rig: SlackRig) -> None:
    rig.model.set_handler(lambda body: None)  # every model call gets a 500
    ts = rig.mention("how does retry work?")
    rig.settle()
    rig.work()
    (reply,) = rig.api.thread_texts("C1", ts)
    assert reply.startswith("Sorry") and "Reference" in reply
    assert rig.api.reactions("C1", ts) == ["warning"]
