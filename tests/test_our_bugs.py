"""A bug of ours is logged as a bug, with its traceback and the question's reference id, and is
never passed off as the model's fault ("the model endpoint sent a reply we could not use")."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest

from tests.support.e2e import Rig
from tests.support.fixture_repos import Corpus, context
from worker.jobs.job import QuestionRun
from worker.ops.logs import log_context
from worker.tools import TOOL_FUNCTIONS, ToolContext, ToolRegistry, ToolResult


def crashing_tool(ctx: ToolContext, path: str) -> ToolResult:
    """Read a thing: a tool with a bug of ours in it.

    path: what to read
    """
    return ToolResult(text=path + 1)  # type: ignore[operator]  # the bug: str + int


class RegistryWithABug(ToolRegistry):
    def schemas(self) -> list[dict[str, Any]]:
        raise TypeError("a bug of ours while describing the tools")


def test_a_tool_that_crashes_is_logged_with_its_traceback_and_the_questions_reference(
    corpus: Corpus, caplog: pytest.LogCaptureFixture
) -> None:
    registry = ToolRegistry([crashing_tool])
    with log_context(job_id="q-console-x", ref="abcd1234"), caplog.at_level(logging.ERROR, "codebot.tools"):
        outcome = registry.call(context(corpus), "crashing_tool", {"path": "a"})
    assert not outcome.ok and outcome.text == "Error: the tool failed unexpectedly (TypeError)"
    (record,) = [r for r in caplog.records if r.name == "codebot.tools"]
    assert record.getMessage() == "tool crashing_tool crashed"
    assert record.exc_info is not None and record.exc_info[0] is TypeError
    assert record.__dict__["ref"] == "abcd1234" and record.__dict__["job_id"] == "q-console-x"


def test_our_own_type_error_while_answering_is_a_crash_with_a_reference_not_a_model_failure(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = dataclasses.replace(rig.runtime, registry=RegistryWithABug(TOOL_FUNCTIONS))
    question = rig.question("how does retry work?")
    with caplog.at_level(logging.ERROR, "codebot.job"):
        outcome = QuestionRun(runtime, rig.redis, question).run()
    assert (outcome.status, outcome.reason) == ("failed", "crash")
    (record,) = [r for r in caplog.records if r.getMessage() == "question crashed"]
    assert record.exc_info is not None and record.exc_info[0] is TypeError
    assert record.__dict__["ref"] == outcome.ref
    kind, fields = rig.final(rig.events(question))
    assert kind == "failed" and f"Reference: `{outcome.ref}`" in str(fields["text"])
    assert "could not use" not in str(fields["text"]) and rig.model.requests == []
