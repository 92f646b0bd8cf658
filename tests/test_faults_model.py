"""The model endpoint failing or slow: bounded retries, bounded time, a partial answer or an apology.

A real OpenAI client against the scripted model server, through a real RQ worker; what the
asker sees is read back from the console sink. (tests/test_agent_budgets.py has the hop limit,
a single 429, 500s from the start and midway, a rejected key and a reply slower than the deadline.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.e2e import Rig, build_rig
from tests.support.metrics import metric_value, samples
from tests.support.model_server import Reply, error, raw, slow, text, tool_calls
from worker.jobs.queue import queue_depth
from worker.ops.accounting import usage_of_day
from worker.ops.metrics import exposition

# Far longer than any of these questions takes, even on a machine 8x slower than usual: each
# must end by the failure it scripts (its retries spent, an apology at once), which the text and
# the request count say; never by running out of time. Wall-clock bounds would say less and fail
# on a busy machine.
DEADLINE_SECONDS = 60.0
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


def ask(rig: Rig) -> tuple[str, dict[str, object]]:
    _, events = rig.ask("how does retry work?")
    return rig.final(events)


def test_a_429_storm_asking_to_wait_past_the_deadline_is_an_apology_at_once(rig: Rig) -> None:
    # an hour: the SDK's own waiting would outlast the test's timeout, not just take longer
    rig.model.set_handler(lambda _body: error(429, headers={"retry-after": "3600"}))
    kind, fields = ask(rig)
    assert kind == "failed" and "kept rate-limiting us (429)" in str(fields["text"])
    assert len(rig.model.requests) == 1  # not asked again after waiting


def test_a_429_storm_is_retried_a_bounded_number_of_times_within_the_deadline(rig: Rig) -> None:
    rig.model.set_handler(lambda _body: error(429, headers={"retry-after": "0.3"}))
    kind, fields = ask(rig)
    assert kind == "failed" and "Reference: `" in str(fields["text"])
    assert "kept rate-limiting us (429)" in str(fields["text"])  # its retries spent, not its time
    assert len(rig.model.requests) == 3  # one call and model_max_retries retries
    assert [h.get("x-stainless-retry-count") for h in rig.model.headers] == ["0", "1", "2"]


def test_a_429_storm_midway_still_answers_from_what_was_found(rig: Rig) -> None:
    rig.model.enqueue(READ_RETRY)
    rig.model.set_handler(lambda _body: error(429, headers={"retry-after": "0.2"}))
    kind, fields = ask(rig)
    assert kind == "answer" and "kept rate-limiting us (429)" in str(fields["markdown"])
    assert f"blob/{rig.sha}/payments/retry.py#L1" in str(fields["markdown"])


@pytest.mark.slow
def test_every_attempt_timing_out_ends_the_question_within_the_deadline(tmp_path: Path) -> None:
    # Each attempt may wait an hour: only the 6 s deadline ends this question before the test's
    # timeout fails it, however slow the machine.
    for rig in build_rig(
        tmp_path, question_deadline_seconds=6, model_max_retries=2, model_timeout_seconds=3600
    ):
        rig.model.set_handler(lambda _body: slow(3600, text("too late")))
        kind, fields = ask(rig)
        assert kind == "failed" and "did not answer in time" in str(fields["text"])
        assert 1 <= len(rig.model.requests) <= 3  # the attempts share the deadline


def test_intermittent_5xx_errors_are_retried_and_the_question_answered(rig: Rig) -> None:
    rig.model.enqueue(
        error(500), READ_RETRY, error(503), error(502), text("Five attempts [payments:payments/retry.py#L3].")
    )
    kind, fields = ask(rig)
    assert kind == "answer" and "Five attempts" in str(fields["markdown"])
    assert len(rig.model.requests) == 5


@pytest.mark.parametrize("reply", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_reply_before_anything_was_found_is_an_apology_with_a_reference(
    rig: Rig, reply: Reply
) -> None:
    rig.model.set_handler(lambda _body: reply)
    kind, fields = ask(rig)
    assert kind == "failed" and "sent a reply we could not use" in str(fields["text"])
    assert "Reference: `" in str(fields["text"])
    assert len(rig.model.requests) == 1  # garbage is not asked for again: an apology at once


def test_a_malformed_reply_midway_still_answers_from_what_was_found(rig: Rig) -> None:
    rig.model.enqueue(READ_RETRY, raw("{oops"))
    kind, fields = ask(rig)
    assert kind == "answer" and "could not finish answering" in str(fields["markdown"])
    assert f"blob/{rig.sha}/payments/retry.py#L1" in str(fields["markdown"])


def test_a_model_that_never_calls_a_tool_ends_as_not_an_answer_saying_so(tmp_path: Path) -> None:
    for rig in build_rig(tmp_path, max_hops=3):
        rig.model.set_handler(lambda _body: text(""))
        kind, fields = ask(rig)
        assert kind == "failed" and fields["outcome"] == "not_an_answer"
        assert "never made a usable tool call, so no code was read" in str(fields["text"])
        assert len(rig.model.requests) == 3 + 1  # every hop, then one forced answer
        found = samples(exposition(rig.redis, queue_depth).decode())
        assert metric_value(found, 'codebot_questions_total{platform="console",status="not_an_answer"}') == 1
        assert metric_value(found, "codebot_failures_total") == 0  # the endpoint did not fail


def test_a_model_whose_every_tool_call_fails_read_no_code_and_ends_as_a_failure(tmp_path: Path) -> None:
    for rig in build_rig(tmp_path, max_hops=2):
        rig.model.set_handler(lambda _body: tool_calls(("read_file", "{not json")))
        kind, fields = ask(rig)
        assert kind == "failed" and fields["outcome"] == "not_an_answer"
        assert "never made a usable tool call" in str(fields["text"])


def test_tokens_spent_before_the_model_failed_still_count_against_the_day(rig: Rig) -> None:
    rig.model.enqueue(tool_calls(("read_file", {"repo": "payments", "path": "no/such.py"})), error(401))
    kind, _ = ask(rig)
    assert kind == "failed"  # nothing was found: an apology, but the first call's tokens were used
    assert usage_of_day(rig.redis).tokens > 0


def test_a_lone_surrogate_escaped_in_a_reply_is_sent_back_as_a_replacement_character(rig: Rig) -> None:
    # JSON may escape half a UTF-16 pair ("\ud800"); Python decodes it to a character UTF-8
    # cannot hold, and the next request, which sends the reply back, could not be encoded
    call = '{"repo": "payments", "path": "payments/retry.py"}'
    rig.model.enqueue(
        raw(
            '{"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [{"index": 0,'
            ' "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "reading \\udcff",'
            ' "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file",'
            f' "arguments": {json.dumps(call)}}}}}]}}}}]}}'
        ),
        text("It tries 5 times [payments:payments/retry.py#L3]."),
    )
    kind, fields = ask(rig)
    assert kind == "answer" and "It tries 5 times" in str(fields["markdown"])
    sent_back = rig.model.requests[1]["messages"]
    assert "reading \ufffd" in json.dumps(sent_back, ensure_ascii=False)


def test_a_lone_surrogate_escaped_in_the_final_answer_reaches_the_asker_as_a_replacement_character(
    rig: Rig,
) -> None:
    rig.model.enqueue(
        READ_RETRY,
        raw(
            '{"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [{"index": 0,'
            ' "finish_reason": "stop", "message": {"role": "assistant",'
            ' "content": "It tries 5 times \\udcff [payments:payments/retry.py#L3]."}}]}'
        ),
    )
    kind, fields = ask(rig)
    assert kind == "answer" and "It tries 5 times \ufffd" in str(fields["markdown"])
