"""Probing that harms nothing and time fitted to the server (worker/agent/server_kind.py, pacing.py).

The scripted server plays each real server's metadata (what discovery GETs) and its answers;
codebot must tell the kind apart without sending what would crash it, bound every reply, learn
the speeds from ordinary answers, and end a question it cannot finish in time saying which
setting to raise and the speed it measured.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from config.settings import load_settings
from tests.support.e2e import Rig, build_rig
from tests.support.model_server import raw, slow, text, tool_calls
from worker.agent.endpoint_memory import EndpointMemory
from worker.jobs.runtime import build_runtime
from worker.jobs.status_view import status_facts

READ = tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}))
ANSWER = text("It tries 5 times [payments:payments/retry.py#L3].")
LLAMA_CPP_PROPS = {
    "build_info": "b1-test",
    "default_generation_settings": {"n_ctx": 8192},
    "chat_template_caps": {"supports_tools": False, "supports_tool_calls": False},
}


def ask(rig: Rig, question: str = "How many times does retry try?") -> tuple[str, dict[str, Any]]:
    _, events = rig.ask(question)
    return rig.final(events)


def endpoint_facts(rig: Rig) -> dict[str, Any]:
    facts = status_facts(rig.redis, rig.runtime)["model"]["endpoints"]
    return next(e for e in facts if e["configured"])


def test_llama_cpp_python_is_never_sent_what_crashes_it_and_every_request_is_bounded(tmp_path: Path) -> None:
    # llama-cpp-python's /v1/models says owned_by "me"; a tool_choice="required" would be its HTTP 500
    for rig in build_rig(
        tmp_path,
        model_options={
            "model_fields": {"owned_by": "me"},
            "strict": ["tool_choice_required_silent", "stream_with_tools_empty", "null_content"],
        },
    ):
        rig.model.enqueue(READ, ANSWER)
        assert ask(rig)[0] == "answer"
        sent = rig.model.requests
        assert len(sent) == 2  # nothing refused, nothing retried
        assert all(body.get("tool_choice") != "required" and not body.get("stream") for body in sent)
        assert all(0 < body["max_tokens"] <= 8192 for body in sent)
        facts = endpoint_facts(rig)
        assert facts["server_kind"] == "llama-cpp-python" and "tool_choice_required" in facts["refused"]


def test_the_reply_bound_is_the_setting_when_one_is_set(tmp_path: Path) -> None:
    for rig in build_rig(tmp_path, model_max_tokens=300):
        rig.model.enqueue(READ, ANSWER)
        assert ask(rig)[0] == "answer"
        assert [body["max_tokens"] for body in rig.model.requests] == [300, 300]


def test_a_chat_template_without_tools_ends_the_question_at_once_saying_no_code_was_read(
    tmp_path: Path,
) -> None:
    for rig in build_rig(tmp_path, model_options={"props": LLAMA_CPP_PROPS}):
        kind, fields = ask(rig)
        assert kind != "answer" and "no code was read" in fields["text"].lower()
        assert rig.model.requests == []  # no completion sent to find out
        assert endpoint_facts(rig)["ignored"] == ["tools"] and endpoint_facts(rig)["refused"] == []


def test_an_answer_without_a_tool_call_to_tool_choice_required_is_remembered_as_ignored(
    tmp_path: Path,
) -> None:
    for rig in build_rig(tmp_path):
        rig.model.enqueue(text("Five, I think."), READ, ANSWER)
        ask(rig)
        facts = endpoint_facts(rig)
        assert "tool_choice_required" in facts["ignored"] and facts["refused"] == []
        assert 'ignores tool_choice="required"' in facts["summary"]


def with_timings(content: str, prompt_tps: float, generation_tps: float) -> Any:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
        ],
        "usage": {"prompt_tokens": 3000, "completion_tokens": 40},
        "timings": {
            "prompt_n": 3000,
            "prompt_per_second": prompt_tps,
            "predicted_n": 40,
            "predicted_per_second": generation_tps,
        },
    }
    return raw(json.dumps(body))


def test_llama_cpp_timings_are_remembered_as_the_endpoints_speeds(tmp_path: Path) -> None:
    for rig in build_rig(tmp_path, model_stream=False):
        rig.model.enqueue(
            READ, with_timings("It tries 5 times [payments:payments/retry.py#L3].", 120.0, 12.5)
        )
        assert ask(rig)[0] == "answer"
        facts = endpoint_facts(rig)
        assert facts["generation_tokens_per_second"] == 12.5 and facts["prompt_tokens_per_second"] == 120.0
        assert "measured: reads 120 tokens/s, writes 12.5 tokens/s" in facts["summary"]


def seeded(
    rig: Rig,
    kind: str,
    prompt_tps: float = 0.0,
    generation_tps: float = 0.0,
    busy_for: float = 0.0,
    concurrency: int = 0,
) -> None:
    memory = EndpointMemory(rig.settings, rig.redis)
    memory.remember_kind(kind)
    memory.remember_concurrency(concurrency)
    memory.remember_context(8192, "test")
    if prompt_tps:
        memory.remember_speed(prompt_tps, generation_tps)
    if busy_for:
        memory.remember_busy_until(time.time() + busy_for)


def test_a_reply_the_measured_speed_cannot_finish_in_time_is_not_asked_for(tmp_path: Path) -> None:
    for rig in build_rig(tmp_path, question_deadline_seconds=20.0):
        seeded(rig, "llama-cpp-python", prompt_tps=20.0, generation_tps=2.0)  # ~3,000 prompt tokens: 150 s
        kind, fields = ask(rig)
        assert kind == "failed" and rig.model.requests == []
        # what one turn needs at the measured speeds, and values that fit them (worker/agent/time_advice.py)
        assert "did not answer in time; one turn here needs" in fields["text"]
        assert "at 20 tokens/s" in fields["text"] and "at 2.0 tokens/s" in fields["text"]
        assert "CODEBOT_QUESTION_DEADLINE_SECONDS=" in fields["text"]
        assert rig.model.base_url.split("//")[1].split("/")[0] in fields["text"]  # the host


def test_no_request_is_sent_while_an_abandoned_reply_still_runs_on_a_server_seen_serving_one_at_a_time(
    tmp_path: Path,
) -> None:
    for rig in build_rig(tmp_path, question_deadline_seconds=20.0):
        seeded(rig, "llama-cpp-python", busy_for=600.0, concurrency=1)
        kind, fields = ask(rig)
        assert kind == "failed" and rig.model.requests == []
        assert "did not answer in time" in fields["text"]


def test_an_endpoint_never_reached_says_so_in_status(tmp_path: Path) -> None:
    for rig in build_rig(tmp_path):
        facts = endpoint_facts(rig)
        assert facts["reached"] is False and facts["summary"] == "never reached"
        settings = load_settings(
            env_file=None, data_dir=tmp_path / "data", openai_base_url="http://127.0.0.1:9/v1"
        )
        other = status_facts(rig.redis, build_runtime(settings))["model"]["endpoints"][0]
        assert other["summary"] == "never reached" and other["endpoint"] == "http://127.0.0.1:9/v1"


def test_a_retry_waits_until_the_abandoned_reply_would_be_done_on_a_server_that_keeps_generating(
    tmp_path: Path,
) -> None:
    arrivals: list[float] = []
    replies = [slow(12.0, READ), READ, ANSWER]  # the first is still "generating" 12 s after it came

    def handler(_body: dict[str, Any]) -> Any:
        arrivals.append(time.monotonic())
        return replies[len(arrivals) - 1]

    # measured at 5,000 tokens/s reading and 50 writing: 300 tokens take 6 s, so an attempt gets ~8.5 s
    for rig in build_rig(
        tmp_path,
        question_deadline_seconds=60.0,
        model_max_tokens=300,
        model_max_retries=1,
        model_stream=False,
    ):
        seeded(rig, "llama-cpp-python", prompt_tps=5000.0, generation_tps=50.0)
        rig.model.set_handler(handler)
        kind, _ = ask(rig)
        assert kind == "answer" and len(arrivals) == 3
        # the retry came only once the abandoned reply would have been done (12 s after it started)
        assert arrivals[1] - arrivals[0] >= 12.0
