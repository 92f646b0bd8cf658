"""An apology for a slow endpoint advises setting values that fit the speeds it measured, and
following the advice never leads to a second raise for the same result (worker/agent/time_advice.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.e2e import build_rig
from tests.support.model_server import tool_calls
from worker.agent.endpoint_memory import EndpointMemory
from worker.agent.events import NoEvents
from worker.agent.loop import Agent, ModelFailure
from worker.agent.model import make_openai_client
from worker.agent.pacing import Speeds
from worker.agent.time_advice import Situation, advise
from worker.tools import make_context

MARGIN_AND_TURNS = 1.25 * 2  # every attempt's margin, and a question's two turns (read, answer)


def named(advice: str, setting: str) -> int | None:
    found = re.search(rf"{setting}(\d+)", advice)
    return int(found.group(1)) if found else None


def question_fits(speeds: Speeds, prompt_tokens: int, reply_tokens: int, deadline: float) -> bool:
    turn = prompt_tokens / speeds.prompt_tps + reply_tokens / speeds.generation_tps
    return MARGIN_AND_TURNS * turn <= deadline


def followed(situation: Situation, advice: str) -> Situation:
    """The situation once an operator set what the advice named, at the same speeds."""
    return Situation(
        situation.speeds,
        situation.prompt_tokens,
        named(advice, "CODEBOT_MODEL_MAX_TOKENS=") or situation.reply_tokens,
        named(advice, "CODEBOT_QUESTION_DEADLINE_SECONDS=") or situation.deadline_seconds,
        named(advice, "-c ") or situation.window_tokens,
    )


def test_slow_writing_advises_a_reply_bound_and_a_deadline_that_fit_the_measured_speeds() -> None:
    # the first hour of issue 35: SmolLM2-135M on a CPU, writing 2.2 tokens/s, up to 2,048 tokens a turn
    situation = Situation(Speeds(95.0, 2.2), prompt_tokens=3874, reply_tokens=2048, deadline_seconds=150)
    advice = advise(situation)
    assert "one turn here needs ~17 min" in advice and "2.2 tokens/s" in advice
    tokens, deadline = (
        named(advice, "CODEBOT_MODEL_MAX_TOKENS="),
        named(advice, "CODEBOT_QUESTION_DEADLINE_SECONDS="),
    )
    assert tokens is not None and deadline is not None and tokens < 2048
    assert question_fits(situation.speeds, 3874, tokens, deadline)
    assert deadline < 15 * 60  # not the 17 minutes a raise alone would have needed


def test_slow_writing_within_a_roomy_deadline_advises_only_a_smaller_reply_bound() -> None:
    situation = Situation(Speeds(900.0, 30.0), prompt_tokens=3000, reply_tokens=2048, deadline_seconds=150)
    advice = advise(situation)
    tokens = named(advice, "CODEBOT_MODEL_MAX_TOKENS=")
    assert tokens is not None and named(advice, "CODEBOT_QUESTION_DEADLINE_SECONDS=") is None
    assert question_fits(situation.speeds, 3000, tokens, 150)


def test_slow_reading_advises_the_deadline_the_prompt_needs_not_a_smaller_reply() -> None:
    situation = Situation(Speeds(20.0, 20.0), prompt_tokens=3000, reply_tokens=300, deadline_seconds=150)
    advice = advise(situation)
    assert "reading ~3,000 prompt tokens at 20 tokens/s" in advice
    assert named(advice, "CODEBOT_MODEL_MAX_TOKENS=") is None
    deadline = named(advice, "CODEBOT_QUESTION_DEADLINE_SECONDS=")
    assert deadline is not None and question_fits(situation.speeds, 3000, 300, deadline)


def test_a_window_too_small_for_a_reply_advises_a_window_that_holds_the_prompt_and_a_reply() -> None:
    situation = Situation(
        Speeds(95.0, 2.2), prompt_tokens=1900, reply_tokens=512, deadline_seconds=150, window_tokens=2048
    )
    advice = advise(situation)
    assert "window (2,048 tokens) leaves 148" in advice
    window, reply = named(advice, "-c "), named(advice, "CODEBOT_MODEL_MAX_TOKENS=") or 512
    assert window is not None and window >= 1900 + reply  # the prompt and a whole reply
    deadline = named(advice, "CODEBOT_QUESTION_DEADLINE_SECONDS=")
    assert deadline is not None and question_fits(situation.speeds, 1900, reply, deadline)


def test_a_prompt_no_deadline_could_read_is_said_instead_of_advising_a_raise() -> None:
    situation = Situation(Speeds(2.0, 20.0), prompt_tokens=3000, reply_tokens=300, deadline_seconds=150)
    advice = advise(situation)
    assert (
        "no setting makes a question fit here" in advice
        and "reading the prompt alone takes ~25 min" in advice
    )
    assert "CODEBOT_" not in advice.split(":", 1)[1]


def test_following_the_advice_and_failing_again_at_the_same_speeds_advises_no_second_raise() -> None:
    for situation in (
        Situation(Speeds(95.0, 2.2), 3874, 2048, 150),
        Situation(Speeds(20.0, 20.0), 3000, 300, 150),
        Situation(Speeds(95.0, 2.2), 1900, 512, 150, window_tokens=2048),
    ):
        again = advise(followed(situation, advise(situation)))
        assert "holds already" in again and "CODEBOT_" not in again.replace(
            "CODEBOT_QUESTION_DEADLINE_SECONDS holds", ""
        )


def test_no_advice_is_made_up_when_the_writing_speed_was_never_measured() -> None:
    assert advise(Situation(Speeds(0.0, 0.0), 3000, 2048, 150)) == ""


def test_a_question_out_of_time_on_a_slow_writer_names_values_that_fit_not_just_a_raise(
    tmp_path: Path,
) -> None:
    # issue 35's first hour: the apology said "raise CODEBOT_QUESTION_DEADLINE_SECONDS" three times
    clock = Clock()

    class SlowTurn(NoEvents):
        def thinking(self) -> None:
            clock.now += 148.5  # the model's first turn took nearly all of the question's 150 s

    for rig in build_rig(tmp_path, question_deadline_seconds=150):
        EndpointMemory(rig.settings).remember_speed(2000.0, 2.2)  # measured on earlier questions
        rig.model.enqueue(tool_calls(("search", {"pattern": "retry"})))
        with rig.runtime.mirrors.lease([rig.repo]) as snapshots:
            agent = Agent(
                rig.settings,
                make_openai_client(rig.settings),
                rig.runtime.registry,
                make_context(rig.settings, snapshots),
                clock=clock,
                events=SlowTurn(),
            )
            with pytest.raises(ModelFailure) as failed:
                agent.run(rig.question("how does retry work?"))
        said = str(failed.value)
        assert failed.value.kind == "deadline" and "at 2.2 tokens/s" in said, said
        tokens, deadline = (
            named(said, "CODEBOT_MODEL_MAX_TOKENS="),
            named(said, "CODEBOT_QUESTION_DEADLINE_SECONDS="),
        )
        assert tokens is not None and deadline is not None
        assert MARGIN_AND_TURNS * (tokens / 2.2) <= deadline  # what it names holds a reply at that speed


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
