"""Strict and odd OpenAI-compatible servers: codebot finds what each accepts and answers anyway.

The scripted model server plays the refusals real servers send (STRICT_MODES); each test runs
whole questions through RQ and checks what was sent, what the asker got, and that what was
learned is remembered per endpoint: in Redis, so a fresh work horse (no memory of its own)
does not repeat the refused attempt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.e2e import Rig, build_rig
from tests.support.model_server import text, tool_calls
from worker.agent.endpoint_memory import forget_in_process
from worker.jobs.admin import status_report
from worker.ops.accounting import usage_of_day

READ = tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}))
ANSWER = text("Five attempts [payments:payments/retry.py#L3].")


def answered(rig: Rig) -> str:
    _, events = rig.ask("how does retry work?")
    kind, fields = rig.final(events)
    assert kind == "answer", fields
    return str(fields["markdown"])


def tool_call_turns(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls")]


def test_tool_call_turns_go_out_with_empty_content_which_servers_rejecting_null_accept(
    tmp_path: Path,
) -> None:
    for rig in build_rig(tmp_path, model_options={"strict": {"null_content", "absent_content"}}):
        rig.model.enqueue(READ, ANSWER)
        assert "Five attempts" in answered(rig)
        assert [t["content"] for t in tool_call_turns(rig.model.requests[1])] == [""]
        assert len(rig.model.requests) == 2  # nothing refused, nothing retried


def test_a_server_rejecting_empty_content_gets_turns_without_it_and_every_worker_learns(
    tmp_path: Path,
) -> None:
    for rig in build_rig(tmp_path, model_options={"strict": {"empty_content"}}):
        rig.model.enqueue(READ, ANSWER)
        assert "Five attempts" in answered(rig)
        refused, retried = rig.model.requests[1], rig.model.requests[2]
        assert tool_call_turns(refused)[0]["content"] == "" and "content" not in tool_call_turns(retried)[0]
        forget_in_process()  # the next question runs in a fresh work horse: only Redis remembers
        rig.model.enqueue(READ, ANSWER)
        answered(rig)
        assert len(rig.model.requests) == 3 + 2 and "content" not in tool_call_turns(rig.model.requests[4])[0]


@pytest.mark.parametrize(
    "mode",
    ["tool_choice_required", "tool_choice_required_silent"],
    ids=["a 400 naming tool_choice", "a 500 with no text, like llama-cpp-python"],
)
def test_a_refusal_of_required_falls_back_to_auto_and_every_worker_remembers_it(
    tmp_path: Path, mode: str
) -> None:
    for rig in build_rig(tmp_path, model_options={"strict": {mode}}):
        rig.model.enqueue(READ, ANSWER)
        answered(rig)
        assert [r.get("tool_choice") for r in rig.model.requests] == ["required", "auto", "auto"]
        forget_in_process()  # a fresh work horse: only Redis remembers
        rig.model.enqueue(READ, ANSWER)
        answered(rig)
        assert [r.get("tool_choice") for r in rig.model.requests[3:]] == ["auto", "auto"]
        report = status_report(rig.redis, rig.runtime)
        assert 'no tool_choice="required"' in report  # admins see what was learned


def test_a_refused_parallel_tool_calls_flag_is_left_out(tmp_path: Path) -> None:
    options = {"strict": {"parallel_tool_calls"}}
    for rig in build_rig(tmp_path, model_options=options, max_tool_calls_per_turn=1):
        rig.model.enqueue(READ, ANSWER)
        answered(rig)
        assert rig.model.requests[0]["parallel_tool_calls"] is False
        assert all("parallel_tool_calls" not in r for r in rig.model.requests[1:])


def test_refused_stream_options_are_left_out_and_the_tokens_still_counted(tmp_path: Path) -> None:
    for rig in build_rig(tmp_path, model_options={"strict": {"stream_options"}}):
        rig.model.enqueue(READ, ANSWER)
        answered(rig)
        later = rig.model.requests[1:]
        assert all(r["stream"] and "stream_options" not in r for r in later)
        assert usage_of_day(rig.redis).tokens > 0  # estimated: the stream had no usage chunk


@pytest.mark.parametrize(
    "mode",
    ["stream", "stream_with_tools_empty"],
    ids=["a 400 naming stream", "a 200 stream that ends empty, like llama-cpp-python"],
)
def test_a_server_that_cannot_stream_is_asked_without_streaming_from_then_on(
    tmp_path: Path, mode: str
) -> None:
    for rig in build_rig(tmp_path, model_options={"strict": {mode}}):
        rig.model.enqueue(READ, ANSWER)
        assert "Five attempts" in answered(rig)
        assert [bool(r.get("stream")) for r in rig.model.requests] == [True, False, False]


def test_a_refused_tool_choice_none_folds_the_tool_history_into_text_for_the_final_answer(
    tmp_path: Path,
) -> None:
    options = {"strict": {"tool_choice_none", "tools_with_tool_history"}}
    for rig in build_rig(tmp_path, model_options=options, max_hops=1):
        rig.model.enqueue(READ, ANSWER)
        assert "Five attempts" in answered(rig)
        refused, folded = rig.model.requests[1], rig.model.requests[2]
        assert refused["tool_choice"] == "none"
        assert "tools" not in folded and not any(m["role"] == "tool" for m in folded["messages"])
        roles = [m["role"] for m in folded["messages"]]
        assert roles == ["system", "user", "assistant", "user"]  # still alternating
        assert "MAX_ATTEMPTS = 5" in folded["messages"][2]["content"]  # the tool output, as text


def test_a_final_answer_that_calls_tools_anyway_is_asked_again_with_the_history_folded(
    tmp_path: Path,
) -> None:
    for rig in build_rig(tmp_path, max_hops=1):
        rig.model.enqueue(READ, READ, ANSWER)  # the second READ ignores tool_choice="none"
        assert "Five attempts" in answered(rig)
        assert rig.model.requests[1]["tool_choice"] == "none" and "tools" not in rig.model.requests[2]


def test_vllm_without_auto_tool_choice_is_an_apology_and_status_names_the_missing_flag(
    tmp_path: Path,
) -> None:
    for rig in build_rig(tmp_path, model_options={"strict": {"tool_choice_auto", "tool_choice_required"}}):
        _, events = rig.ask("how does retry work?")
        kind, fields = rig.final(events)
        assert kind == "failed" and "never made a usable tool call" in str(fields["text"])
        assert "--enable-auto-tool-choice" in status_report(rig.redis, rig.runtime)
