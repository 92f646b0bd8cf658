"""Time inside a question: each model attempt has a total bound, tool calls stop at the deadline,
and one turn cannot run more tool calls than the cap (every call still gets its reply)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.e2e import Rig, build_rig
from tests.support.model_server import text, tool_calls, trickle
from worker.agent.events import NoEvents
from worker.agent.loop import Agent, AgentResult, ModelFailure
from worker.agent.model import make_openai_client
from worker.tools import make_context

LONG_ANSWER = text("Retries back off exponentially. " * 40)  # ~1,300 bytes: 45 minutes at 1 byte / 2 s


def ask_failed(rig: Rig) -> str:
    _, events = rig.ask("how does retry work?")
    kind, fields = rig.final(events)
    assert kind == "failed", fields
    return str(fields["text"])


def test_a_streamed_reply_trickling_a_byte_every_2_s_is_cut_at_the_deadline_with_a_clear_reason(
    tmp_path: Path,
) -> None:
    # the attempt's own bound is an hour: only the 6 s deadline cuts the reply before the test's
    # timeout fails it, however slow the machine
    for rig in build_rig(tmp_path, question_deadline_seconds=6, model_timeout_seconds=3600):
        rig.model.set_handler(lambda _body: trickle(2.0, LONG_ANSWER))
        message = ask_failed(rig)
        assert "still sending its reply" in message and "cut off" in message
        assert "Error" not in message and "Exception" not in message  # words, not a class name


@pytest.mark.slow
def test_a_whole_json_reply_trickling_in_is_cut_by_each_attempts_total_bound(tmp_path: Path) -> None:
    for rig in build_rig(
        tmp_path,
        question_deadline_seconds=60,
        model_timeout_seconds=3,
        model_max_retries=1,
        model_stream=False,
    ):
        rig.model.set_handler(lambda _body: trickle(2.0, LONG_ANSWER))
        assert "cut off" in ask_failed(rig)
        # both attempts, each cut after its 3 s: without that bound the first would run on to the
        # question's deadline and be the only one
        assert len(rig.model.requests) == 2


class SteppingClock:
    """The agent's clock; every tool call that starts takes 3 s of it (a slow search)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run_agent(rig: Rig, clock: Any = time.monotonic, events: Any = None, **overrides: Any) -> AgentResult:
    settings = rig.settings.model_copy(update=overrides)
    with rig.runtime.mirrors.lease([rig.repo]) as snapshots:
        ctx = make_context(settings, snapshots)
        agent = Agent(
            settings, make_openai_client(settings), rig.runtime.registry, ctx, clock=clock, events=events
        )
        return agent.run(rig.question("how does retry work?"))


def test_the_calls_of_one_turn_start_together_with_time_left_and_no_turn_starts_after_the_deadline(
    tmp_path: Path,
) -> None:
    clock = SteppingClock()

    class SlowTools(NoEvents):  # 3 s pass as each call's progress is shown: 45 s for the turn
        def tool_started(self, call_id: str, name: str, arguments: dict[str, Any], description: str) -> None:
            clock.now += 3.0

    for rig in build_rig(tmp_path):
        rig.model.enqueue(tool_calls(*[("search", {"pattern": f"retry{i}|MAX"}) for i in range(15)]))
        result = run_agent(
            rig, clock=clock, events=SlowTools(), question_deadline_seconds=20, max_tool_calls_per_turn=20
        )
        # all started at once with time left (each bounded by the deadline), each answered
        assert result.tool_calls == 15 and not [t for t in result.trace if t.endswith("skipped (deadline)")]
        assert result.stop_reason == "deadline"
        assert len(rig.model.requests) == 1  # no time left for another model turn


def test_a_question_whose_time_ran_out_before_any_tool_ran_says_so(tmp_path: Path) -> None:
    clock = SteppingClock()

    class SlowModel(NoEvents):
        def thinking(self) -> None:
            clock.now += 18.5  # the model's first turn took nearly all of the question's 20 s

    for rig in build_rig(tmp_path):
        rig.model.enqueue(tool_calls(("search", {"pattern": "retry"})))
        with pytest.raises(ModelFailure) as failed:
            run_agent(rig, clock=clock, events=SlowModel(), question_deadline_seconds=20)
        assert failed.value.kind == "deadline" and "ran out before any code was read" in str(failed.value)
        assert "raise CODEBOT_QUESTION_DEADLINE_SECONDS" in str(failed.value)
        assert failed.value.hops == 1 and failed.value.tool_calls == 0


def test_tool_calls_beyond_the_per_turn_cap_get_an_error_the_model_can_read(tmp_path: Path) -> None:
    for rig in build_rig(tmp_path):
        calls = [("read_file", {"repo": "payments", "path": p}) for p in ("README.md", "payments/retry.py")]
        rig.model.enqueue(tool_calls(*calls, *calls), text("Done [payments:README.md#L1]."))
        result = run_agent(rig, max_tool_calls_per_turn=2)
        replies = [m for m in rig.model.requests[1]["messages"] if m["role"] == "tool"]
        assert len(replies) == 4 and result.tool_calls == 2
        assert [r["content"].startswith("Error: not run: at most 2 tool calls") for r in replies] == [
            False,
            False,
            True,
            True,
        ]


def test_a_search_stops_at_the_questions_deadline(tmp_path: Path) -> None:
    for rig in build_rig(tmp_path):
        with rig.runtime.mirrors.lease([rig.repo]) as snapshots:
            ctx = make_context(rig.settings, snapshots)
            ctx.deadline = time.monotonic()  # the question's time is up
            outcome = rig.runtime.registry.call(ctx, "search", {"pattern": "retry"})
        assert outcome.ok and outcome.text.startswith("[search timed out after 0 s; results are partial")
        assert outcome.data["timed_out"] is True
