"""Each finished question's record for the console (worker/jobs/question_log.py): what a real
run keeps, what it never keeps, and the bound."""

from __future__ import annotations

import pytest

from tests.support.e2e import Rig
from tests.support.model_server import text, tool_calls
from worker.jobs.question_log import QUESTIONS_KEPT, QUESTIONS_KEY, recent_questions, record_question


def answer_one(rig: Rig, question: str) -> None:
    rig.model.enqueue(
        tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"})),
        text("It tries five times [payments:payments/retry.py#L3]."),
    )
    rig.ask(question)


def test_a_finished_question_keeps_its_facts_and_trace_but_never_its_answer(rig: Rig) -> None:
    answer_one(rig, "how many attempts?")
    [record] = recent_questions(rig.redis)
    assert (record["status"], record["platform"], record["repos"]) == ("answered", "console", ["payments"])
    assert record["tools"] == {"read_file": 1} and record["trace"][0].startswith("read_file")
    assert record["question"] == "how many attempts?"
    assert "answer" not in record and "five times" not in rig.redis.lindex(QUESTIONS_KEY, 0).decode()


@pytest.mark.rig(feedback_keep_question_text=False)
def test_without_keeping_question_texts_the_record_has_none(rig: Rig) -> None:
    answer_one(rig, "how many attempts?")
    [record] = recent_questions(rig.redis)
    assert record["question"] == "" and record["status"] == "answered"


def test_the_list_keeps_only_the_latest_records(rig: Rig) -> None:
    question = rig.question("q")
    for n in range(QUESTIONS_KEPT + 5):
        record_question(rig.redis, rig.settings, question, {"status": "answered", "ref": str(n)})
    kept = recent_questions(rig.redis)
    assert len(kept) == QUESTIONS_KEPT and kept[0]["ref"] == str(QUESTIONS_KEPT + 4)
    assert rig.redis.ttl(QUESTIONS_KEY) > 0
