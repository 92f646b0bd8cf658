"""The ReplySink contract (worker/jobs/sink.py) and the outbox behind it (worker/jobs/outbox.py),
held the same on Slack and on Discord.

A final message the platform refuses is stored and counted once; the run that answered is done
with it, and the outbox posts it once the platform takes it again. A message the platform never
takes is given up after `delivery_give_up_seconds` and shown in `/codebot status`. A delivery
attempt after a partial one completes it without posting anything twice.
"""

from __future__ import annotations

import pytest
from rq import Queue

from bot.slack.format import format_for_slack
from bot.slack.sink import SlackSink
from tests.support.delivery import FAST_DELIVERY, deliver_until_settled
from tests.support.discord_rig import DiscordRig, asked_question
from tests.support.metrics import metric_value, samples
from tests.support.model_server import error, text, tool_calls
from tests.support.slack_rig import SlackRig
from worker.jobs.admin import status_report
from worker.jobs.job import QuestionRun
from worker.jobs.question import Question, reference_id
from worker.jobs.queue import QUESTIONS_QUEUE, queue_depth
from worker.jobs.sink import Answer, DeliveryFailed
from worker.ops.accounting import usage_of_day
from worker.ops.metrics import exposition


def questions_counted(redis: object) -> float:
    return metric_value(samples(exposition(redis, queue_depth).decode()), "codebot_questions_total")  # type: ignore[arg-type]


def asked_on_slack(rig: SlackRig) -> tuple[str, Question]:
    ts = rig.mention("how does retry work?")
    rig.settle()
    (job,) = Queue(QUESTIONS_QUEUE, connection=rig.redis).jobs
    return ts, Question.model_validate_json(job.args[0])


def apologies(rig: SlackRig, ts: str) -> list[str]:
    return [text for text in rig.api.thread_texts("C1", ts) if "Sorry" in text]


@pytest.mark.rig("slack", **FAST_DELIVERY)
def test_on_slack_an_apology_refused_in_an_outage_is_counted_once_and_posted_once_slack_is_back(
    rig: SlackRig,
) -> None:
    ts, question = asked_on_slack(rig)
    rig.model.set_handler(lambda _body: error(401))
    rig.api.outage("http500")
    outcome = QuestionRun(rig.runtime, rig.redis, question).run()
    assert (outcome.status, outcome.delivery) == ("failed", "pending")  # stored; the run is done
    assert questions_counted(rig.redis) == 1 and apologies(rig, ts) == []
    rig.api.outage(None)
    assert deliver_until_settled(rig.redis, rig.runtime, question.id) == "delivered"
    assert QuestionRun(rig.runtime, rig.redis, question).run().status == "already_answered"  # RQ's retry
    assert len(apologies(rig, ts)) == 1 and questions_counted(rig.redis) == 1
    assert rig.api.reactions("C1", ts) == ["warning"]


@pytest.mark.drig(**FAST_DELIVERY)
def test_on_discord_an_apology_refused_in_an_outage_is_counted_once_and_posted_once_discord_is_back(
    drig: DiscordRig,
) -> None:
    fake, rig = drig.fake, drig.rig
    asked, question = asked_question(drig)
    rig.model.set_handler(lambda _body: error(401))
    fake.outage(503)
    outcome = QuestionRun(rig.runtime, rig.redis, question).run()
    assert (outcome.status, outcome.delivery) == ("failed", "pending")
    assert questions_counted(rig.redis) == 1 and fake.posted(asked["id"]) == []
    fake.outage(None)
    assert deliver_until_settled(rig.redis, rig.runtime, question.id) == "delivered"
    assert QuestionRun(rig.runtime, rig.redis, question).run().status == "already_answered"
    posted = [m["content"] for m in fake.posted(asked["id"])]
    assert len(posted) == 1 and "Sorry" in posted[0] and questions_counted(rig.redis) == 1
    assert drig.reactions(asked["id"])[-2:] == [("PUT", "⚠️"), ("DELETE", "👀")]


@pytest.mark.rig("slack", **FAST_DELIVERY)
def test_tokens_of_an_answer_slack_refused_are_accounted_once(rig: SlackRig) -> None:
    ts, question = asked_on_slack(rig)
    rig.model.enqueue(
        tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"})),
        text("It retries 5 times [payments:payments/retry.py#L3]."),
    )
    rig.api.outage("ratelimited")
    outcome = QuestionRun(rig.runtime, rig.redis, question).run()
    assert outcome.delivery == "pending" and outcome.prompt_tokens > 0
    rig.api.outage(None)
    assert deliver_until_settled(rig.redis, rig.runtime, question.id) == "delivered"
    QuestionRun(rig.runtime, rig.redis, question).run()  # RQ's retry of the job: no second run of the model
    usage = usage_of_day(rig.redis)
    assert (usage.questions, usage.tokens) == (1, outcome.prompt_tokens + outcome.completion_tokens)
    (reply,) = rig.api.thread_texts("C1", ts)
    assert "retries 5 times" in reply and rig.api.reactions("C1", ts) == ["white_check_mark"]


@pytest.mark.rig("slack", delivery_give_up_seconds=1.0, **FAST_DELIVERY)
def test_an_answer_slack_refuses_past_the_bound_is_given_up_and_shown_in_status(rig: SlackRig) -> None:
    _ts, question = asked_on_slack(rig)
    rig.model.set_handler(lambda _body: error(401))
    rig.api.outage("http500")  # Slack never takes it again
    assert QuestionRun(rig.runtime, rig.redis, question).run().delivery == "pending"
    assert deliver_until_settled(rig.redis, rig.runtime, question.id) == "undeliverable"
    report = status_report(rig.redis, rig.runtime)
    assert "Answers never delivered (given up) in the last 7 days: 1" in report
    assert f"`{reference_id(question.id)}` on slack" in report and "(HTTP 500)" in report


@pytest.mark.rig("slack", **FAST_DELIVERY)
def test_an_answer_for_a_slack_channel_that_is_gone_is_given_up_at_once(rig: SlackRig) -> None:
    _ts, question = asked_on_slack(rig)
    rig.model.set_handler(lambda _body: error(401))
    rig.api.fail("chat.update", "channel_not_found", count=100)
    rig.api.fail("chat.postMessage", "channel_not_found", count=100)
    assert QuestionRun(rig.runtime, rig.redis, question).run().delivery == "undeliverable"
    assert "Answers never delivered (given up) in the last 7 days: 1" in status_report(rig.redis, rig.runtime)


@pytest.mark.rig("slack")
def test_a_long_answer_delivered_again_after_a_partial_attempt_posts_no_part_twice(rig: SlackRig) -> None:
    ts, question = asked_on_slack(rig)
    answer = Answer(markdown="\n\n".join(f"Part {n}: " + "x" * 3000 for n in range(3)), ref="abc")
    parts = format_for_slack(answer.markdown)
    assert len(parts) == 3
    SlackSink(rig.settings, rig.redis, question).received()  # the placeholder
    rig.api.fail("chat.postMessage", "internal_error", count=1)  # the second part is refused
    with pytest.raises(DeliveryFailed, match="internal_error"):
        SlackSink(rig.settings, rig.redis, question).answer(answer)
    for _attempt in range(2):  # the outbox's next attempt, and one more (its record was lost)
        SlackSink(rig.settings, rig.redis, question).answer(answer)
    assert rig.api.thread_texts("C1", ts) == parts
    posts = [c for c in rig.api.calls_to("chat.postMessage") if c.body.get("thread_ts") == ts]
    assert len(posts) == 1 + 1 + 2  # the placeholder, the refused part, then parts 2 and 3 once
