"""The ReplySink contract (worker/jobs/sink.py), held the same on Slack and on Discord.

An answer or apology the platform refuses is not counted as posted: the run raises
DeliveryFailed, the question stays unclaimed, nothing is counted, and a later run posts it once.
"""

from __future__ import annotations

import pytest
from rq import Queue

from tests.support.discord_rig import DiscordRig, asked_question
from tests.support.metrics import metric_value, samples
from tests.support.model_server import error
from tests.support.slack_rig import SlackRig
from worker.jobs.job import QuestionRun
from worker.jobs.question import Question
from worker.jobs.queue import QUESTIONS_QUEUE, queue_depth, was_answered
from worker.jobs.sink import DeliveryFailed
from worker.ops.metrics import exposition


def questions_counted(redis: object) -> float:
    return metric_value(samples(exposition(redis, queue_depth).decode()), "codebot_questions_total")  # type: ignore[arg-type]


@pytest.mark.rig("slack")
def test_on_slack_an_apology_that_could_not_be_posted_is_not_counted_and_a_retry_posts_it_once(
    rig: SlackRig,
) -> None:
    ts = rig.mention("how does retry work?")
    rig.settle()
    (job,) = Queue(QUESTIONS_QUEUE, connection=rig.redis).jobs
    question = Question.model_validate_json(job.args[0])
    rig.model.set_handler(lambda _body: error(401))
    rig.api.fail("chat.update", "channel_not_found", count=100)  # Slack refuses every edit
    with pytest.raises(DeliveryFailed):
        QuestionRun(rig.runtime, rig.redis, question).run()
    assert not was_answered(rig.redis, question.id)  # left to the retry
    assert questions_counted(rig.redis) == 0
    assert not any("Sorry" in text for text in rig.api.thread_texts("C1", ts))
    rig.api.fail("chat.update", "channel_not_found", count=0)  # Slack takes it again
    assert QuestionRun(rig.runtime, rig.redis, question).run().status == "failed"
    apologies = [text for text in rig.api.thread_texts("C1", ts) if "Sorry" in text]
    assert len(apologies) == 1 and questions_counted(rig.redis) == 1


def test_on_discord_an_apology_that_could_not_be_posted_is_not_counted_and_a_retry_posts_it_once(
    drig: DiscordRig,
) -> None:
    fake = drig.fake
    asked, question = asked_question(drig)
    drig.rig.model.set_handler(lambda _body: error(401))
    fake.refuse(100, method="PATCH")  # Discord refuses every edit (the apology replaces the progress)
    with pytest.raises(DeliveryFailed):
        QuestionRun(drig.rig.runtime, drig.rig.redis, question).run()
    assert not was_answered(drig.rig.redis, question.id)
    assert questions_counted(drig.rig.redis) == 0
    assert not any("Sorry" in m["content"] for m in fake.posted(asked["id"]))
    fake.refuse(0)
    assert QuestionRun(drig.rig.runtime, drig.rig.redis, question).run().status == "failed"
    apologies = [m for m in fake.posted(asked["id"]) if "Sorry" in m["content"]]
    assert len(apologies) == 1 and questions_counted(drig.rig.redis) == 1
