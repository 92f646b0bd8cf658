"""The Quality page's figures over the history database (SQLite, and a real PostgreSQL marked
slow): what counts as a gap in the code and what as our failure, and one "time to answer"
shared with `codebot_question_seconds`."""

from __future__ import annotations

import json

import pytest

from bot.web.app import build_app
from bot.web.data import answer_seconds
from bot.web.quality_data import quality_view
from tests.support.console_rig import OPERATOR_TOKEN, request, serving
from tests.support.e2e import Rig
from tests.support.history_db import HistoryDb, history_db, postgres_server
from tests.support.model_server import error, text, tool_calls
from worker.history import schema
from worker.jobs.question_log import recent_questions
from worker.ops.metrics import METRICS_KEY

__all__ = ["history_db", "postgres_server"]  # fixtures
NOW = 20_787 * 86400 + 12 * 3600.0  # noon UTC


def question(
    n: int, status: str, seconds: float, failure_kind: str = "", reason: str | None = None
) -> dict[str, object]:
    facts = {"failure_kind": failure_kind} if failure_kind else {}
    return {"event_id": f"{n:032x}", "at": NOW - n * 60, "question_id": f"q{n}", "ref": f"{n:08x}",
            "asked_at": NOW - n * 60 - 500, "platform": "slack", "channel": "C1", "thread": "", "asker": "U1",
            "repos": json.dumps(["payments"]), "follow_up": False, "status": status, "reason": reason,
            "seconds": seconds, "hops": 1, "tool_calls": 1, "prompt_tokens": 1, "completion_tokens": 1,
            "question": "", "facts": json.dumps(facts)}  # fmt: skip


def test_refusals_endpoint_errors_and_crashes_are_our_failures_and_only_an_unanswerable_question_is_a_gap(
    history_db: HistoryDb,
) -> None:
    rows = [
        question(1, "answered", 10.0),
        question(2, "not_an_answer", 20.0),  # code searched, nothing it could use
        question(3, "not_an_answer", 30.0, failure_kind="tools_unseen"),  # the endpoint hid the tools
        question(4, "budget_spent", 40.0),
        question(5, "failed", 50.0, failure_kind="auth"),  # a 401
        question(6, "failed", 60.0, reason="crash"),
    ]
    with history_db.engine.begin() as connection:
        connection.execute(schema.questions.insert(), rows)
    view = quality_view(history_db.engine, 14, NOW)
    total = view.total
    assert dict(total.kinds) == {"answered": 1, "no answer in the code": 1, "we failed": 4}
    assert dict(total.causes) == {"endpoint": 2, "budget": 1, "infrastructure": 1}
    assert total.answer_rate == 1 / 6 * 100 and (total.p50, total.p95) == (30.0, 60.0)
    assert [d.questions for d in view.days] == [0] * 13 + [6]  # every day of the range, the empty ones too
    (gap,) = view.gaps
    assert (gap.repo, gap.no_answer, gap.failed) == ("payments", 1, 4)


def test_the_consoles_time_to_answer_is_the_seconds_the_metric_observed_without_the_queue_wait(
    rig: Rig,
) -> None:
    rig.model.enqueue(
        tool_calls(("search", {"pattern": "def retry"})),
        text("It retries five times [payments:payments/retry.py#L3]."),
    )
    rig.ask("how many times does retry try?")
    (record,) = recent_questions(rig.redis)
    observed = float(rig.redis.hget(METRICS_KEY, "codebot_question_seconds_sum") or 0)
    assert observed > 0 and answer_seconds(record) == observed
    assert float(record["at"]) - float(record["asked_at"]) > observed  # the queue's wait, not counted


@pytest.mark.rig(web_token=OPERATOR_TOKEN)
def test_without_a_history_or_with_an_empty_one_quality_says_its_figures_come_from_the_capped_list(
    rig: Rig, history_db: HistoryDb
) -> None:
    rig.model.enqueue(error(500))  # one question kept, whatever its outcome
    rig.ask("what does retry do?")
    bearer = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    with serving(build_app(rig.runtime, rig.redis)) as base:
        _, _, without = request(base + "/quality", bearer)
    with serving(build_app(rig.runtime, rig.redis, history=history_db.engine)) as base:
        _, _, empty = request(base + "/quality", bearer)
    assert "No history database here" in without and "The history database holds no question yet" in empty
    for page in (without, empty):
        assert "capped list of the latest questions, 1 question, the oldest from" in page
        assert 'id="quality-range"' not in page  # no range is claimed as counted
