"""A queue you can see (bot/queue_notices.py): a question waiting longer than
`queue_notice_after_seconds` gets a placeholder with its place in the queue, edited only when
its place changes, and the answer later lands in that same message. No worker runs while the
questions wait; then one answers one question, then the rest."""

from __future__ import annotations

from typing import Any

import pytest
from rq import Queue, SimpleWorker

from bot import texts
from bot.slack.app import queue_notices
from bot.slack.format import format_for_slack
from tests.support.discord_rig import DiscordRig
from tests.support.model_server import text, tool_calls
from tests.support.slack_rig import SlackRig, wait_until
from worker.jobs.queue import QUESTIONS_QUEUE

READ_RETRY = ("read_file", {"repo": "payments", "path": "payments/retry.py", "start_line": 1, "end_line": 13})
ANSWER = "It retries 5 times [payments:payments/retry.py#L3]."
FAST = {"queue_notice_after_seconds": 0.3, "queue_notice_update_seconds": 0.0}


def answer_one(redis: Any) -> None:
    """A worker comes up, answers the question at the front of the queue, and stops."""
    SimpleWorker([Queue(QUESTIONS_QUEUE, connection=redis)], connection=redis).work(
        burst=True, max_jobs=1, logging_level="WARNING"
    )


def slack_waiting(ahead: int) -> str:
    return format_for_slack(texts.waiting(ahead))[0]


@pytest.mark.rig("slack", **FAST)
def test_slack_questions_behind_a_backlog_show_their_place_and_are_answered_in_that_message(
    rig: SlackRig,
) -> None:
    asked = [rig.mention(f"how does retry work, take {n}?") for n in range(3)]
    rig.settle()
    stop = queue_notices(rig.settings, rig.redis).start()  # as `codebot slack` runs it
    try:  # the adapter enqueues in parallel: the queue's order decides each one's place
        shown = lambda: sorted(tuple(rig.api.thread_texts("C1", ts)) for ts in asked)  # noqa: E731
        wait_until(lambda: shown() == [(slack_waiting(n),) for n in (1, 2, 0)], timeout=30)  # sorted
        last = next(ts for ts in asked if rig.api.thread_texts("C1", ts) == [slack_waiting(2)])
        rig.model.enqueue(tool_calls(READ_RETRY), text(ANSWER))
        answer_one(rig.redis)
        wait_until(lambda: rig.api.thread_texts("C1", last) == [slack_waiting(1)], timeout=30)
    finally:
        stop.set()
    (last_placeholder,) = rig.api.thread_messages("C1", last)
    edits = [c.body["text"] for c in rig.api.calls_to("chat.update") if c.body["ts"] == last_placeholder.ts]
    assert edits == [slack_waiting(1)]  # edited once, when its place changed
    rig.model.enqueue(tool_calls(READ_RETRY), text(ANSWER), tool_calls(READ_RETRY), text(ANSWER))
    rig.work()
    for ts in asked:  # one message per thread: the notice became the answer
        (reply,) = rig.api.thread_texts("C1", ts)
        assert "retries 5 times" in reply and rig.api.reactions("C1", ts) == ["white_check_mark"]


@pytest.mark.drig(**FAST)
def test_discord_questions_behind_a_backlog_show_their_place_and_are_answered_in_that_message(
    drig: DiscordRig,
) -> None:
    asked = [drig.mention(f"how does retry work, take {n}?") for n in range(2)]
    drig.queued(2)

    def shown() -> list[list[str]]:  # the bot's messages in each question's answer thread
        return [[m["content"] for m in drig.fake.posted(message["id"])] for message in asked]

    # the adapter enqueues in parallel: the queue's order decides each one's place
    drig.fake.wait_for(
        lambda: sorted(shown()) == sorted([[texts.waiting(0)], [texts.waiting(1)]]), timeout=30
    )
    second = shown().index([texts.waiting(1)])
    drig.script_answer("It retries 5 times [payments:payments/retry.py#L3].")
    answer_one(drig.rig.redis)
    drig.fake.wait_for(lambda: shown()[second] == [texts.waiting(0)], timeout=30)
    drig.script_answer("It retries 5 times [payments:payments/retry.py#L3].")
    drig.work()
    for message in asked:  # one message per thread: the notice became the answer
        (reply,) = drig.fake.posted(message["id"])
        assert reply["content"].startswith("It retries 5 times") and ("PUT", "✅") in drig.reactions(
            message["id"]
        )
