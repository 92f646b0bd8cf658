"""Model turns stream: text deltas and tool calls reach the AgentEvents observer as they happen.

The agent runs directly (no queue) against the scripted model server, which streams replies
as OpenAI does (server-sent events, tool calls in fragments, a usage chunk with no choices).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.e2e import Rig, build_rig
from tests.support.model_server import raw, text, tool_calls
from worker.agent.events import NoEvents
from worker.agent.loop import Agent, AgentResult
from worker.agent.model import make_openai_client
from worker.tools import make_context


class Recorder(NoEvents):
    """Every event, in order, as (name, details)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def thinking(self) -> None:
        self.seen.append(("thinking", None))

    def text(self, delta: str) -> None:
        self.seen.append(("text", delta))

    def tool_started(self, call_id: str, name: str, arguments: dict[str, Any], description: str) -> None:
        self.seen.append(("tool_started", (call_id, name, arguments, description)))

    def tool_finished(self, call_id: str, ok: bool, failure: str = "") -> None:
        self.seen.append(("tool_finished", (call_id, ok)))

    def names(self) -> list[str]:
        return [name for name, _ in self.seen if name != "text"]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    yield from build_rig(tmp_path)


def run_agent(rig: Rig, events: Any, question: str = "how does retry work?") -> AgentResult:
    with rig.runtime.mirrors.lease([rig.repo]) as snapshots:
        ctx = make_context(rig.settings, snapshots)
        client = make_openai_client(rig.settings)
        agent = Agent(rig.settings, client, rig.runtime.registry, ctx, events=events, redis=rig.redis)
        return agent.run(rig.question(question))


def test_text_streams_as_deltas_and_tool_calls_are_reported_in_order(rig: Rig) -> None:
    rig.model.enqueue(
        tool_calls(("search", {"pattern": "MAX_ATTEMPTS", "repo": "payments"}), content="Let me search."),
        text("It retries five times [payments:payments/retry.py#L3]."),
    )
    recorder = Recorder()
    result = run_agent(rig, recorder)
    assert all(r["stream"] and r["stream_options"] == {"include_usage": True} for r in rig.model.requests)
    assert recorder.names() == ["thinking", "tool_started", "tool_finished", "thinking"]
    started = recorder.seen[[n for n, _ in recorder.seen].index("tool_started")][1]
    assert started[1:] == (
        "search",
        {"pattern": "MAX_ATTEMPTS", "repo": "payments"},
        "searching `MAX_ATTEMPTS` in payments",
    )
    deltas = [d for n, d in recorder.seen if n == "text"]
    assert len(deltas) > 2 and "".join(deltas) == "Let me search." + result.text  # preamble, then the answer
    assert ("tool_finished", (started[0], True)) in recorder.seen


def test_parallel_tool_call_fragments_are_assembled_by_index(rig: Rig) -> None:
    rig.model.enqueue(
        tool_calls(
            ("search", {"pattern": "def retry"}),
            ("read_file", {"repo": "payments", "path": "README.md"}),
            ("list_files", {"repo": "payments", "path": "payments"}),
        ),
        text("Done [payments:README.md#L1]."),
    )
    result = run_agent(rig, NoEvents())
    assert result.tool_calls == result.usable_tool_calls == 3
    last = rig.model.requests[-1]["messages"]
    sent = [c for m in last if m.get("tool_calls") for c in m["tool_calls"]]
    assert [json.loads(c["function"]["arguments"]) for c in sent][1] == {
        "repo": "payments",
        "path": "README.md",
    }
    assert [m["tool_call_id"] for m in last if m["role"] == "tool"] == [c["id"] for c in sent]


def test_the_usage_chunk_with_no_choices_is_what_the_question_is_charged(rig: Rig) -> None:
    rig.model.enqueue(
        tool_calls(("read_file", {"repo": "payments", "path": "README.md"})),
        text("Hi [payments:README.md#L1]."),
    )
    result = run_agent(rig, NoEvents())
    reported = [rig.model.tokens_of(r) for r in rig.model.requests]  # what the server counted
    assert len(reported) == 2 and result.prompt_tokens == sum(reported)


def test_a_server_that_ignores_stream_and_answers_in_one_json_body_is_understood(rig: Rig) -> None:
    completion = {
        "id": "x",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Plain."}}
        ],
    }
    rig.model.enqueue(tool_calls(("list_repos", {})), raw(json.dumps(completion)))
    recorder = Recorder()
    assert run_agent(rig, recorder).text == "Plain."
    assert ("text", "Plain.") in recorder.seen  # a reply in one piece is one delta


def test_a_failing_observer_never_fails_the_question(rig: Rig) -> None:
    class Broken(NoEvents):
        def tool_started(self, call_id: str, name: str, arguments: dict[str, Any], description: str) -> None:
            raise RuntimeError("the chat platform is down")

    rig.model.enqueue(tool_calls(("list_repos", {})), text("One repo."))
    assert run_agent(rig, Broken()).text == "One repo."


def test_every_streamed_model_call_of_a_question_reuses_one_connection(rig: Rig) -> None:
    """A stream read only to `[DONE]` left its connection unusable: every model call paid a new
    connection (a TLS handshake on a hosted API)."""
    rig.model.enqueue(  # a first question: the server is discovered (GETs, a connection of their own)
        tool_calls(("search", {"pattern": "MAX_ATTEMPTS", "repo": "payments"})),
        text("Five [payments:payments/retry.py#L3]."),
    )
    run_agent(rig, Recorder())
    before = rig.model.connections_opened
    rig.model.enqueue(
        tool_calls(("search", {"pattern": "MAX_ATTEMPTS", "repo": "payments"})),
        tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"})),
        text("It retries five times [payments:payments/retry.py#L3]."),
    )
    result = run_agent(rig, Recorder())
    assert result.outcome == "answered" and len(rig.model.requests) == 5
    assert all(r["stream"] for r in rig.model.requests)
    assert rig.model.connections_opened - before == 1  # three streamed calls, one connection
