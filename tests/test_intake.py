"""The one intake (bot/intake.py), tested once against real Redis: what both adapters share.

Each platform has a thin test of its own through its real rig (test_slack_events.py,
test_discord_mentions.py); everything between "this is a question" and the queue is here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from redis import ConnectionPool, Redis
from rq import Queue

from bot import texts
from bot.intake import Ask, Intake
from config.repos import load_whitelist
from config.settings import Settings, load_settings
from worker.jobs.question import Question, ReplyTarget, Turn
from worker.jobs.queue import QUESTIONS_QUEUE
from worker.jobs.threads import record_turn
from worker.ops.accounting import BUDGET_SPENT_MESSAGE, record_usage
from worker.ops.redis_connection import connect, stop_embedded_server

REPOS = (
    '[[repo]]\nname = "payments"\nurl = "/nowhere/payments"\n\n'
    '[[repo]]\nname = "internal"\nurl = "/nowhere/internal"\nchannels = ["slack:CSECRET"]\n'
)


@dataclass
class Desk:
    settings: Settings
    redis: Redis
    intake: Intake
    asked: int = 0

    def ask(
        self, text: str, user: str = "U1", channel: str = "C1", is_dm: bool = False, **fields: Any
    ) -> Ask:
        """A new message (its own identity) in `channel`, as the Slack adapter would hand it over."""
        self.asked += 1
        ts = fields.pop("ts", f"1700000000.{self.asked:06d}")
        thread = fields.pop("thread", ts)
        target = ReplyTarget(platform="slack", channel=channel, thread=thread, message=ts, is_dm=is_dm)
        defaults: dict[str, Any] = {"conversation": f"{channel}:{thread}", "opens_thread": thread == ts}
        return Ask(asker=user, text=text, target=target, identity=(channel, ts), **{**defaults, **fields})

    def queued(self) -> list[Question]:
        jobs = Queue(QUESTIONS_QUEUE, connection=self.redis).jobs
        return [Question.model_validate_json(job.args[0]) for job in jobs]


def build_desk(tmp_path: Path, **overrides: Any) -> Iterator[Desk]:
    repos_file = tmp_path / "repos.toml"
    repos_file.write_text(REPOS, encoding="utf-8")
    settings = load_settings(env_file=None, data_dir=tmp_path / "data", repos_file=repos_file, **overrides)
    redis = connect(settings)
    try:
        yield Desk(settings, redis, Intake(settings, load_whitelist(repos_file), lambda: redis))
    finally:
        stop_embedded_server(settings)


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[Desk]:
    yield from build_desk(tmp_path)


def test_a_message_delivered_twice_is_one_question_and_the_second_delivery_gets_nothing(desk: Desk) -> None:
    ask = desk.ask("how does retry work?")
    first, second = desk.intake.submit(ask), desk.intake.submit(ask)
    assert (first.kind, second.kind) == ("enqueued", "duplicate")
    (question,) = desk.queued()
    assert question.text == "how does retry work?" and question.repos == ["payments"]


def test_a_help_word_or_nothing_gets_the_help_and_nothing_is_queued(desk: Desk) -> None:
    assert desk.intake.submit(desk.ask("help")).text == texts.HELP
    assert desk.intake.submit(desk.ask("  ")).text == texts.EMPTY_MENTION
    in_dm = desk.ask("hi", channel="D1", is_dm=True)
    assert desk.intake.submit(in_dm).text == f"{texts.HELP}\n{texts.HELP_IN_DM}"
    assert desk.queued() == []


def test_a_repo_the_channel_may_not_see_gets_the_answer_of_a_repo_that_does_not_exist_and_nothing_is_queued(
    desk: Desk,
) -> None:
    refused = desk.intake.submit(desk.ask("what is in repo:internal?"))
    missing = desk.intake.submit(desk.ask("what is in repo:intarnel?"))
    assert refused.kind == missing.kind == "reply"
    assert refused.text.replace("internal", "NAME") == missing.text.replace("intarnel", "NAME")
    assert refused.text.startswith("There is no repo `internal`. Repos you can ask about here: ")
    unknown = desk.intake.submit(desk.ask("what is in repo:paymnts?"))
    assert unknown.text.startswith("There is no repo `paymnts`. Repos you can ask about here: `payments`")
    allowed = desk.intake.submit(desk.ask("what is in repo:internal?", channel="CSECRET"))
    assert allowed.kind == "enqueued" and [q.repos for q in desk.queued()] == [["internal"]]


def test_a_follow_up_keeps_the_repos_its_thread_named_and_carries_the_threads_history(desk: Desk) -> None:
    first = desk.ask("how does retry work in repo:payments?")
    assert desk.intake.submit(first).kind == "enqueued"
    record_turn(desk.redis, first.target, Turn(question="how does retry work?", answer="It backs off."))
    thread = first.target.thread
    follow_up = desk.ask("and the maximum?", thread=thread, in_thread=True, conversation=f"C1:{thread}")
    assert desk.intake.submit(follow_up).kind == "enqueued"
    question = desk.queued()[-1]
    assert question.repos == ["payments"]
    assert [turn.answer for turn in question.history] == ["It backs off."]
    assert desk.intake.asked_before("slack", f"C1:{thread}", "U1")
    assert not desk.intake.asked_before("slack", f"C1:{thread}", "U2")


def test_a_secret_pasted_into_a_question_never_reaches_the_queue(desk: Desk) -> None:
    desk.intake.submit(desk.ask("why does AKIAQWERTYUIOPASDFGHJ fail? repo:payments"))
    (question,) = desk.queued()
    assert "AKIAQWERTYUIOPASDFGHJ" not in question.text and "[REDACTED" in question.text


def test_limits_refuse_in_order_budget_then_queue_depth_then_the_askers_rate(tmp_path: Path) -> None:
    for desk in build_desk(tmp_path, rate_limit_questions=1, queue_max_depth=2, daily_token_budget=100):
        assert desk.intake.submit(desk.ask("one?")).kind == "enqueued"
        rated = desk.intake.submit(desk.ask("two?"))
        assert rated.text.startswith("You're asking faster than I can answer. Please try again in ")
        assert desk.intake.submit(desk.ask("three?", user="U2")).kind == "enqueued"
        full = desk.intake.submit(desk.ask("four?", user="U3"))
        assert full.text == texts.QUEUE_FULL.format(depth=2)
        record_usage(desk.redis, desk.settings, "slack:U9", 90, 20)
        assert desk.intake.submit(desk.ask("five?", user="U4")).text == BUDGET_SPENT_MESSAGE
        assert len(desk.queued()) == 2


def test_with_redis_down_the_asker_is_told_once_per_message_and_the_next_message_goes_through(
    tmp_path: Path,
) -> None:
    for desk in build_desk(tmp_path):
        ask = desk.ask("how does retry work?")
        stop_embedded_server(desk.settings)
        assert desk.intake.submit(ask).text == texts.QUEUE_UNAVAILABLE
        assert desk.intake.submit(ask).kind == "duplicate"  # a platform retry: told once
        connect(desk.settings)  # the server starts again; the intake's client reconnects by itself
        assert desk.intake.submit(desk.ask("and now?")).kind == "enqueued"


def test_a_thread_the_answer_opens_remembers_its_channel_for_follow_ups(desk: Desk) -> None:
    ask = desk.ask("how does retry work?")
    desk.intake.submit(ask)
    assert desk.intake.thread_parent("slack", f"C1:{ask.target.thread}") == "C1"
    assert desk.intake.thread_parent("slack", "C1:9999.000001") is None


def test_a_question_the_queue_refused_leaves_no_dedupe_claim_and_its_redelivery_is_queued(desk: Desk) -> None:
    # a real refusal after the claim: a Redis user that may claim but not write a hash (thread memory, the job)
    desk.redis.acl_setuser(
        "hashless", enabled=True, nopass=True, keys=["*"], categories=["+@all"], commands=["-hset", "-hmset"]
    )
    pool = desk.redis.connection_pool
    hashless = Redis(
        connection_pool=ConnectionPool(
            connection_class=pool.connection_class, **{**pool.connection_kwargs, "username": "hashless"}
        )
    )
    ask = desk.ask("how does retry work?")
    refused = Intake(desk.settings, desk.intake.whitelist, lambda: hashless).submit(ask)
    assert refused.kind == "reply" and refused.text.startswith("Sorry")  # told, not silence
    assert desk.queued() == []
    redelivered = desk.intake.submit(ask)  # the platform's retry, once the queue takes writes
    assert redelivered.kind == "enqueued" and len(desk.queued()) == 1
