"""The context window: discovered from the server, learned from its error, or configured; the
request is fitted to it, and the system prompt and the question are never dropped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from config.settings import load_settings
from tests.support.e2e import Rig, build_rig
from tests.support.model_server import ScriptedModel, text, tool_calls
from worker.agent.context import TRIMMED_NOTICE, ContextTooSmall, fit, tools_chars
from worker.agent.discovery import discover_context_tokens
from worker.agent.endpoint_memory import EndpointMemory
from worker.agent.model import ModelClient, make_openai_client
from worker.jobs.admin import status_report
from worker.tools import build_registry

BIG = {"big.txt": "\n".join(f"line {i} " + "x" * 80 for i in range(300)), "README.md": "# payments\n"}
READ_BIG = tool_calls(("read_file", {"repo": "payments", "path": "big.txt", "end_line": 200}))
QUESTION = "what is in big.txt?"


def ask(rig: Rig) -> tuple[str, dict[str, Any]]:
    _, events = rig.ask(QUESTION)
    return rig.final(events)


def test_ollamas_window_is_discovered_so_its_silent_truncation_never_drops_the_question(
    tmp_path: Path,
) -> None:
    options = {
        "context_tokens": 4096,
        "context_overflow": "truncate",  # Ollama drops the oldest messages, the question first
        "ollama_show": {
            "parameters": "num_ctx 4096\nstop <|im_end|>",
            "model_info": {"qwen2.context_length": 32768},
        },
    }
    for rig in build_rig(tmp_path, files=BIG, model_options=options):
        rig.model.enqueue(READ_BIG, text("Lines of x [payments:big.txt#L1]."))
        kind, _ = ask(rig)
        assert kind == "answer" and "POST /api/show" in rig.model.metadata_requests
        for seen in rig.model.seen:  # what the model was left with, every turn
            assert seen["messages"][0]["role"] == "system" and seen["messages"][1]["content"] == QUESTION
        assert "context 4,096 tokens (Ollama /api/show num_ctx)" in status_report(rig.redis, rig.runtime)


def test_vllms_max_model_len_sets_the_budget_before_anything_is_refused(tmp_path: Path) -> None:
    options = {"context_tokens": 4096, "model_fields": {"max_model_len": 4096}}
    for rig in build_rig(tmp_path, files=BIG, model_options=options):
        rig.model.enqueue(READ_BIG, text("Lines of x [payments:big.txt#L1]."))
        assert ask(rig)[0] == "answer"
        assert len(rig.model.requests) == 2  # no context error, no retry
        assert "line 0 " in str(rig.model.requests[1]["messages"])  # the read was cut to fit, not dropped


def test_a_context_length_error_teaches_the_window_and_the_turn_is_retried_trimmed(tmp_path: Path) -> None:
    for rig in build_rig(tmp_path, files=BIG, model_options={"context_tokens": 4096}):
        rig.model.enqueue(READ_BIG, text("Lines of x [payments:big.txt#L1]."))
        assert ask(rig)[0] == "answer"
        too_big, trimmed = rig.model.requests[1], rig.model.requests[2]
        assert rig.model.tokens_of(too_big) > 4096 >= rig.model.tokens_of(trimmed)
        assert trimmed["messages"][1]["content"] == QUESTION
        assert "context 4,096 tokens (the server's context-length error)" in status_report(
            rig.redis, rig.runtime
        )


def test_a_window_too_small_for_the_instructions_is_an_apology_that_names_the_fix(tmp_path: Path) -> None:
    for rig in build_rig(tmp_path, model_options={"context_tokens": 1000}):
        kind, fields = ask(rig)
        assert kind == "failed" and "context window (1,000 tokens) is too small" in fields["text"]
        assert "OLLAMA_CONTEXT_LENGTH" in fields["text"] and "--n_ctx" in fields["text"]


def test_a_configured_window_is_used_and_the_server_is_only_asked_what_it_is(tmp_path: Path) -> None:
    for rig in build_rig(tmp_path, files=BIG, model_context_tokens=4096):
        rig.model.enqueue(READ_BIG, text("Lines of x [payments:big.txt#L1]."))
        assert ask(rig)[0] == "answer"
        # which kind of server it is (worker/agent/server_kind.py): read-only routes, once
        asked = rig.model.metadata_requests
        assert asked and all(r.startswith("GET ") or r == "POST /api/show" for r in asked)
        assert len(asked) == len(set(asked))
        assert rig.model.tokens_of(rig.model.requests[1]) < 4096


def tool_names(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request["tools"]]


def test_a_small_window_withholds_the_history_tools_first_and_always_lists_the_contracts_five(
    tmp_path: Path,
) -> None:
    contract = ["list_repos", "search", "read_file", "list_files", "repo_overview"]
    for rig in build_rig(tmp_path / "large", files=BIG):
        rig.model.enqueue(READ_BIG, text("Lines of x [payments:big.txt#L1]."))
        assert ask(rig)[0] == "answer"
        assert {"log", "blame", "show", "diff", "find_definition"} <= set(tool_names(rig.model.requests[0]))
    for rig in build_rig(tmp_path / "small", files=BIG, model_context_tokens=3584):
        rig.model.enqueue(READ_BIG, text("Lines of x [payments:big.txt#L1]."))
        assert ask(rig)[0] == "answer"  # the question about code is still answered, with a citation
        listed = tool_names(rig.model.requests[0])
        assert listed[:5] == contract and not {"log", "blame", "show", "diff"} & set(listed)
        assert "line 0 " in str(rig.model.requests[1]["messages"])  # room was left for the read


SOURCES = {
    "Ollama num_ctx": ({"ollama_show": {"parameters": "num_ctx 8192"}}, (8192, "Ollama /api/show num_ctx")),
    "Ollama default": (
        {"ollama_show": {"model_info": {"llama.context_length": 131072}}},
        (4096, "Ollama's default"),
    ),
    "Ollama loaded": (
        {"ollama_ps": {"models": [{"name": "scripted-model", "context_length": 16384}]}},
        (16384, "Ollama /api/ps"),
    ),
    "llama-server": ({"props": {"default_generation_settings": {"n_ctx": 2048}}}, (2048, "llama-server")),
    "vLLM": ({"model_fields": {"max_model_len": 32768}}, (32768, "max_model_len")),
    "LM Studio": (
        {
            "lmstudio_models": {
                "data": [{"id": "scripted-model", "loaded_context_length": 8192, "max_context_length": 32768}]
            }
        },
        (8192, "LM Studio"),
    ),
    "OpenRouter": ({"model_fields": {"context_length": 128000}}, (128000, "context_length")),
    "a server that says nothing": ({}, None),
}


@pytest.mark.parametrize(("options", "expected"), SOURCES.values(), ids=SOURCES.keys())
def test_each_kind_of_server_says_its_window_where_it_can(
    options: dict[str, Any], expected: tuple[int, str] | None
) -> None:
    with ScriptedModel(**options) as server:
        settings = load_settings(env_file=None, openai_base_url=server.base_url, model="scripted-model")
        found = discover_context_tokens(settings)
    if expected is None:
        assert found is None
    else:
        assert found is not None and found[0] == expected[0] and expected[1] in found[1]


def conversation(history_turns: int, tool_outputs: list[str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "S" * 500}]
    for n in range(history_turns):
        messages += [
            {"role": "user", "content": f"old question {n}"},
            {"role": "assistant", "content": "A" * 300},
        ]
    messages.append({"role": "user", "content": "the question"})
    for n, output in enumerate(tool_outputs):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "search", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": output},
        ]
    return messages


def test_fitting_trims_tool_output_oldest_first_then_history_and_never_the_prompt_or_question() -> None:
    messages = conversation(history_turns=3, tool_outputs=["O" * 3000, "N" * 3000])
    fitted = fit(messages, None, 4200, question_at=7)
    tools = [m["content"] for m in fitted if m["role"] == "tool"]
    assert tools[0] == TRIMMED_NOTICE and tools[1].startswith("NNN") and len(tools[1]) < 3000
    assert [m["content"] for m in fitted[:2]] == ["S" * 500, "old question 0"]  # history kept so far
    tighter = fit(messages, None, 1300, question_at=7)
    assert tighter[0]["content"] == "S" * 500 and tighter[1]["content"] == "the question"  # history gone
    bare = fit(messages, None, 600, question_at=7)  # tool rounds go last, whole: calls with replies
    assert [m["content"] for m in bare] == ["S" * 500, "the question"]
    with pytest.raises(ContextTooSmall):
        fit(messages, None, 500, question_at=7)


def test_a_server_that_cannot_be_reached_is_asked_for_its_window_again_next_time() -> None:
    with ScriptedModel() as server:
        url = server.base_url  # closed when the block ends
    settings = load_settings(env_file=None, openai_base_url=url, model_discovery_timeout_seconds=2)
    assert discover_context_tokens(settings) == (0, "unreachable")
    memory = EndpointMemory(settings)
    ModelClient(settings, make_openai_client(settings), memory).window()
    assert memory.context() is None  # nothing remembered: the next question asks again


def test_the_tools_size_counted_for_a_request_is_the_size_of_their_json_as_listed() -> None:
    # The registry's schemas are counted once per process; the count must stay exact for any
    # subset a small window leaves listed, and for a schema seen for the first time.
    schemas = build_registry().schemas()
    for count in range(len(schemas) + 1):
        assert tools_chars(schemas[:count]) == len(json.dumps(schemas[:count]))
    fresh = {"type": "function", "function": {"name": "ünïcode", "description": "x" * 5000}}
    assert tools_chars([fresh, *schemas]) == len(json.dumps([fresh, *schemas]))
    assert tools_chars(list(reversed(schemas))) == len(json.dumps(list(reversed(schemas))))
