"""Errors that name the fix: the asker hears what kind of failure it was; the server's own words
go to the log under the reference id and to `codebot status`; a failed question is accounted
for what it really did."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from rq.job import Job

from tests.support.e2e import Rig, build_rig
from tests.support.model_server import Reply, error, hang_up, text, tool_calls
from worker.jobs.admin import status_report
from worker.jobs.question import reference_id
from worker.ops.accounting import usage_of_day


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    yield from build_rig(tmp_path)


def test_the_servers_words_are_logged_under_the_reference_and_shown_redacted_in_status(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    words = "Invalid 'messages[2].content': expected a string (request key AKIAQWERTYUIOPASDFGHJ)"
    rig.model.set_handler(lambda _body: error(400, words))
    with caplog.at_level(logging.WARNING, logger="codebot.job"):
        question, events = rig.ask("how does retry work?")
    kind, fields = rig.final(events)
    ref = reference_id(question.id)
    assert kind == "failed" and "refused the request (HTTP 400)" in fields["text"] and ref in fields["text"]
    logged = [
        r for r in caplog.records if getattr(r, "ref", None) == ref and "expected a string" in r.getMessage()
    ]
    assert logged and "AKIAQWERTYUIOPASDFGHJ" not in logged[0].getMessage()
    report = status_report(rig.redis, rig.runtime)
    assert f"`{ref}`: refused (HTTP 400): Invalid 'messages[2].content': expected a string" in report
    assert "[REDACTED:aws-access-key]" in report and "AKIAQWERTYUIOPASDFGHJ" not in report


KINDS: dict[str, tuple[Reply, str]] = {
    "400": (error(400, "bad field"), "the model endpoint at {host} refused the request (HTTP 400)"),
    "404": (error(404), "does not know this model (404): check CODEBOT_MODEL"),
    "401": (error(401), "refused the API key (401): check OPENAI_API_KEY"),
    "503": (error(503), "the model endpoint at {host} failed (HTTP 503)"),
}


@pytest.mark.parametrize(("reply", "says"), KINDS.values(), ids=KINDS.keys())
def test_the_apology_says_what_kind_of_failure_it_was(rig: Rig, reply: Reply, says: str) -> None:
    rig.model.set_handler(lambda _body: reply)
    _, events = rig.ask("how does retry work?")
    kind, fields = rig.final(events)
    host = rig.model.base_url.split("//")[1].split("/")[0]  # the apology names which endpoint failed
    assert kind == "failed" and says.format(host=host) in fields["text"]
    assert "Error" not in fields["text"]  # no exception class names


def test_a_failed_question_is_accounted_for_the_hops_and_tool_calls_it_really_made(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    rig.model.enqueue(
        tool_calls(("list_repos", {})),
        tool_calls(("search", {"pattern": "no_such_thing_anywhere"})),  # runs, finds nothing
    )
    rig.model.set_handler(lambda _body: error(401))
    with caplog.at_level(logging.INFO, logger="codebot.job"):
        question, events = rig.ask("how does retry work?")
    assert rig.final(events)[0] == "failed"
    outcome = Job.fetch(question.id, connection=rig.redis).return_value()
    assert outcome is not None and (outcome["hops"], outcome["tool_calls"]) == (2, 2)
    assert outcome["tools"] == {"list_repos": 1, "search": 1} and outcome["failure_kind"] == "auth"
    line = next(r for r in caplog.records if r.getMessage() == "question failed")
    assert (getattr(line, "hops", 0), getattr(line, "tool_calls", 0)) == (2, 2)
    assert usage_of_day(rig.redis).tokens == outcome["prompt_tokens"] + outcome["completion_tokens"] > 0


def test_a_connection_closed_without_a_response_is_sent_once_more_even_with_retries_off(rig: Rig) -> None:
    assert rig.runtime.settings.model_max_retries == 0
    rig.model.enqueue(hang_up(), tool_calls(("list_repos", {})), text("payments is here."))

    _, events = rig.ask("which repos?")

    kind, _fields = rig.final(events)
    assert kind != "failed"
    assert len(rig.model.requests) == 3  # the hang-up, the same turn again, then the answer


def test_a_second_hang_up_in_one_call_is_a_failure_that_says_the_endpoint_was_unreachable(rig: Rig) -> None:
    rig.model.set_handler(lambda _body: hang_up())

    _, events = rig.ask("which repos?")

    kind, fields = rig.final(events)
    assert kind == "failed" and len(rig.model.requests) == 2  # once more, never in a loop
    assert "model endpoint" in fields["text"] and "Error" not in fields["text"]
