"""The model endpoint failing or slow: bounded retries, bounded time, a partial answer or an apology.

A real OpenAI client against the scripted model server, through a real RQ worker; what the
asker sees is read back from the console sink. (tests/test_agent_budgets.py has the hop limit,
a single 429, 500s from the start and midway, a rejected key and a reply slower than the deadline.)
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.e2e import Rig, build_rig
from tests.support.metrics import metric_value, samples
from tests.support.model_server import Reply, error, raw, slow, text, tool_calls
from worker.jobs.queue import queue_depth
from worker.ops.accounting import usage_of_day
from worker.ops.metrics import exposition

DEADLINE_SECONDS = 8.0
READ_RETRY = tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}))
MALFORMED = {
    "not JSON": raw("this is not json"),
    "an HTML page with 200": raw("<html><body>Bad Gateway</body></html>", content_type="text/html"),
    "cut-off JSON": raw(
        '{"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": "ha'
    ),
    "no choices": raw('{"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []}'),
    "a null message": raw(
        '{"id": "x", "object": "chat.completion", "created": 1, "model": "m",'
        ' "choices": [{"index": 0, "finish_reason": "stop", "message": null}]}'
    ),
}


pytestmark = pytest.mark.rig(
    question_deadline_seconds=DEADLINE_SECONDS, model_max_retries=2, model_timeout_seconds=10.0
)


def timed_ask(rig: Rig) -> tuple[str, dict[str, object], float]:
    started = time.monotonic()
    _, events = rig.ask("how does retry work?")
    kind, fields = rig.final(events)
    return kind, fields, time.monotonic() - started


def test_a_429_storm_asking_to_wait_past_the_deadline_is_an_apology_at_once(rig: Rig) -> None:
    rig.model.set_handler(lambda _body: error(429, headers={"retry-after": "30"}))
    kind, fields, seconds = timed_ask(rig)
    assert kind == "failed" and "kept rate-limiting us (429)" in str(fields["text"])
    assert len(rig.model.requests) == 1 and seconds < 20  # not 2 x 30 s of the SDK's own waiting


def test_a_429_storm_is_retried_a_bounded_number_of_times_within_the_deadline(rig: Rig) -> None:
    rig.model.set_handler(lambda _body: error(429, headers={"retry-after": "0.3"}))
    kind, fields, seconds = timed_ask(rig)
    assert kind == "failed" and "Reference: `" in str(fields["text"])
    assert len(rig.model.requests) == 3  # one call and model_max_retries retries
    assert [h.get("x-stainless-retry-count") for h in rig.model.headers] == ["0", "1", "2"]
    assert seconds < DEADLINE_SECONDS


def test_a_429_storm_midway_still_answers_from_what_was_found(rig: Rig) -> None:
    rig.model.enqueue(READ_RETRY)
    rig.model.set_handler(lambda _body: error(429, headers={"retry-after": "0.2"}))
    kind, fields, seconds = timed_ask(rig)
    assert kind == "answer" and "kept rate-limiting us (429)" in str(fields["markdown"])
    assert f"blob/{rig.sha}/payments/retry.py#L1" in str(fields["markdown"])
    assert seconds < DEADLINE_SECONDS


@pytest.mark.slow
def test_every_attempt_timing_out_ends_the_question_within_the_deadline(tmp_path: Path) -> None:
    for rig in build_rig(
        tmp_path, question_deadline_seconds=6, model_max_retries=2, model_timeout_seconds=30
    ):
        rig.model.set_handler(lambda _body: slow(60, text("too late")))
        kind, fields, seconds = timed_ask(rig)
        assert kind == "failed" and "did not answer in time" in str(fields["text"])
        assert len(rig.model.requests) <= 3 and seconds < 60  # the 6 s deadline, not 3 x 30 s


def test_intermittent_5xx_errors_are_retried_and_the_question_answered(rig: Rig) -> None:
    rig.model.enqueue(
        error(500), READ_RETRY, error(503), error(502), text("Five attempts [payments:payments/retry.py#L3].")
    )
    kind, fields, _ = timed_ask(rig)
    assert kind == "answer" and "Five attempts" in str(fields["markdown"])
    assert len(rig.model.requests) == 5


@pytest.mark.parametrize("reply", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_reply_before_anything_was_found_is_an_apology_with_a_reference(
    rig: Rig, reply: Reply
) -> None:
    rig.model.set_handler(lambda _body: reply)
    kind, fields, _ = timed_ask(rig)
    assert kind == "failed" and "sent a reply we could not use" in str(fields["text"])
    assert "Reference: `" in str(fields["text"])
    assert len(rig.model.requests) == 1  # garbage is not asked for again: an apology at once


def test_a_malformed_reply_midway_still_answers_from_what_was_found(rig: Rig) -> None:
    rig.model.enqueue(READ_RETRY, raw("{oops"))
    kind, fields, _ = timed_ask(rig)
    assert kind == "answer" and "could not finish answering" in str(fields["markdown"])
    assert f"blob/{rig.sha}/payments/retry.py#L1" in str(fields["markdown"])


def test_a_model_that_never_calls_a_tool_ends_as_not_an_answer_saying_so(tmp_path: Path) -> None:
    for rig in build_rig(tmp_path, max_hops=3):
        rig.model.set_handler(lambda _body: text(""))
        kind, fields, _ = timed_ask(rig)
        assert kind == "failed" and fields["outcome"] == "not_an_answer"
        assert "never made a usable tool call, so no code was read" in str(fields["text"])
        assert len(rig.model.requests) == 3 + 1  # every hop, then one forced answer
        found = samples(exposition(rig.redis, queue_depth).decode())
        assert metric_value(found, 'codebot_questions_total{platform="console",status="not_an_answer"}') == 1
        assert metric_value(found, "codebot_failures_total") == 0  # the endpoint did not fail


def test_a_model_whose_every_tool_call_fails_read_no_code_and_ends_as_a_failure(tmp_path: Path) -> None:
    for rig in build_rig(tmp_path, max_hops=2):
        rig.model.set_handler(lambda _body: tool_calls(("read_file", "{not json")))
        kind, fields, _ = timed_ask(rig)
        assert kind == "failed" and fields["outcome"] == "not_an_answer"
        assert "never made a usable tool call" in str(fields["text"])


def test_tokens_spent_before_the_model_failed_still_count_against_the_day(rig: Rig) -> None:
    rig.model.enqueue(tool_calls(("read_file", {"repo": "payments", "path": "no/such.py"})), error(401))
    kind, _, _ = timed_ask(rig)
    assert kind == "failed"  # nothing was found: an apology, but the first call's tokens were used
    assert usage_of_day(rig.redis).tokens > 0
