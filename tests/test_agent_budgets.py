"""Budgets and failures: the question always ends, with an answer or a clear apology."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.e2e import Rig, build_rig
from tests.support.model_server import error, slow, text, tool_calls

pytestmark = pytest.mark.rig(max_hops=4, budget_warning_hops=2, question_deadline_seconds=20)


def test_endless_searching_hits_the_hop_limit_and_must_answer_without_tools(rig: Rig) -> None:
    rig.model.enqueue(*[tool_calls(("search", {"pattern": f"retry{i}|def retry"})) for i in range(4)])
    rig.model.enqueue(text("From what I saw: [payments:payments/retry.py#L6]."))
    _, events = rig.ask("how does retry work?")
    kind, answer = rig.final(events)
    assert kind == "answer"
    final_request = rig.model.requests[-1]
    # the tools stay listed (strict routes refuse tool history without them), none may be called
    assert final_request["tool_choice"] == "none" and len(final_request["tools"]) == len(
        rig.runtime.registry.tools
    )
    assert "no more tools" in final_request["messages"][-1]["content"]
    tool_replies = [m["content"] for m in final_request["messages"] if m["role"] == "tool"]
    assert "2 tool round(s) left" in tool_replies[1] and "last tool round" in tool_replies[3]
    assert "payments/retry.py#L6" in answer["markdown"]


def test_a_429_then_success_is_retried_and_answered(tmp_path: Path) -> None:
    for rig in build_rig(tmp_path, model_max_retries=2):
        rig.model.enqueue(
            error(429, headers={"retry-after": "0"}), tool_calls(("list_repos", {})), text("fine")
        )
        _, events = rig.ask("which repos?")
        assert rig.final(events)[0] == "answer"
        assert rig.model.headers[1].get("x-stainless-retry-count") == "1"


def test_a_model_that_keeps_failing_before_finding_anything_gets_an_apology_with_a_reference(
    rig: Rig,
) -> None:
    rig.model.set_handler(lambda _body: error(500, {"error": {"message": "boom"}}))
    _question, events = rig.ask("how does retry work?")
    kind, failure = rig.final(events)
    assert kind == "failed"
    assert "model endpoint at 127.0.0.1" in failure["text"] and "failed (HTTP 500)" in failure["text"]
    assert "Reference: `" in failure["text"]


def test_a_rejected_api_key_is_named_in_the_apology(rig: Rig) -> None:
    rig.model.enqueue(error(401, {"error": {"message": "Incorrect API key", "code": "invalid_api_key"}}))
    _, events = rig.ask("how does retry work?")
    kind, failure = rig.final(events)
    assert kind == "failed" and "OPENAI_API_KEY" in failure["text"]


def test_a_model_failing_midway_still_gives_the_best_answer_from_what_was_found(rig: Rig) -> None:
    rig.model.enqueue(tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"})))
    rig.model.set_handler(lambda _body: error(500))
    _, events = rig.ask("how does retry work?")
    kind, answer = rig.final(events)
    assert kind == "answer"
    assert "could not finish" in answer["markdown"]
    assert f"blob/{rig.sha}/payments/retry.py#L1-L13" in answer["markdown"]


def test_a_reply_slower_than_the_deadline_ends_the_question_in_bounded_time(tmp_path: Path) -> None:
    # the reply and the attempt's own bound are an hour: only the 4 s deadline ends the question
    # before the test's timeout fails it, however slow the machine
    for rig in build_rig(tmp_path, question_deadline_seconds=4, model_timeout_seconds=3600):
        rig.model.enqueue(slow(3600, text("too late")))
        _, events = rig.ask("how does retry work?")
        kind, failure = rig.final(events)
        assert kind == "failed" and "did not answer in time" in failure["text"]


def test_the_context_budget_trims_the_oldest_tool_output_first(tmp_path: Path) -> None:
    big = {"big.txt": "\n".join(f"line {i} " + "x" * 80 for i in range(300)), "small.txt": "tiny\n"}
    # the budget counts the tool schemas (~6k characters) and the system prompt too
    for rig in build_rig(tmp_path, files=big, context_budget_chars=14000, read_max_chars=24000):
        rig.model.enqueue(
            tool_calls(("read_file", {"repo": "payments", "path": "big.txt", "end_line": 120})),
            tool_calls(("read_file", {"repo": "payments", "path": "small.txt"})),
            text("done"),
        )
        rig.ask("what is in the files?")
        last = rig.model.requests[-1]
        tools = [m["content"] for m in last["messages"] if m["role"] == "tool"]
        assert "line 0 " in tools[0] and "line 119 " not in tools[0]  # cut, not dropped whole
        assert tools[0].endswith("cut to fit the context budget]")
        assert "tiny" in tools[1]
        assert len(json.dumps(last["messages"])) + len(json.dumps(last["tools"])) < 14000 * 1.1


def test_no_secret_from_the_repo_ever_reaches_the_model_or_the_answer(rig: Rig) -> None:
    rig.model.enqueue(
        tool_calls(
            ("read_file", {"repo": "payments", "path": "payments/settings.py"}),
            ("read_file", {"repo": "payments", "path": ".env"}),
        ),
        tool_calls(("search", {"pattern": "AKIA|sk_live"})),
        text("The key is AKIAQWERTYUIOPASDFGHJ [payments:payments/settings.py#L1]."),
    )
    _, events = rig.ask("what is the AWS key?")
    _kind, answer = rig.final(events)
    assert "AKIAQWERTYUIOPASDFGHJ" not in rig.model.all_text_sent()
    assert "sk_live_51Hplanted" not in rig.model.all_text_sent()
    assert "AKIAQWERTYUIOPASDFGHJ" not in answer["markdown"]
    assert "REDACTED" in answer["markdown"]
