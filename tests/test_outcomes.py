"""An outcome is named for what happened: an answer only when the run read code.

Through the real job on RQ, real Redis and the real openai client against the scripted model;
what the asker gets is read back from the console sink (the same final message every platform
posts: tests/test_outcomes_chat.py has Slack and Discord, tests/test_cli_ask_and_tool.py the
exit codes of `codebot ask`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.e2e import Rig, build_rig
from tests.support.metrics import metric_value, samples
from tests.support.model_server import cut_stream, ignores_tools, made_up_repos, text, tool_calls
from worker.agent.loop import READ_CODE_FIRST
from worker.jobs import texts
from worker.jobs.admin import outcome_counts, status_report
from worker.jobs.queue import queue_depth
from worker.ops.metrics import exposition

READ_RETRY = tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}))
CITED = "It tries five times [payments:payments/retry.py#L3], sleeping longer each time [payments:payments/retry.py#L12]."
PROSE = "Retries are usually handled with exponential backoff in the client."

pytestmark = pytest.mark.rig(model_max_retries=2)


def ask(rig: Rig) -> tuple[str, dict[str, Any], list[str]]:
    _, events = rig.ask("how does retry work?")
    kind, fields = rig.final(events)
    return kind, fields, [str(f.get("text")) for k, f in events if k == "progress"]


def counted(rig: Rig, status: str) -> float:
    found = samples(exposition(rig.redis, queue_depth).decode())
    return metric_value(found, f'codebot_questions_total{{platform="console",status="{status}"}}')


def test_a_prose_first_reply_is_asked_once_more_to_read_code_and_then_answers_from_it(rig: Rig) -> None:
    rig.model.enqueue(text(PROSE), READ_RETRY, text(CITED))
    kind, fields, _ = ask(rig)
    assert kind == "answer" and fields["outcome"] == "answered"
    assert f"blob/{rig.sha}/payments/retry.py#L3" in str(fields["markdown"])
    assert PROSE not in str(fields["markdown"])
    reask = rig.model.requests[1]
    assert reask["messages"][-2] == {"role": "assistant", "content": PROSE}
    assert reask["messages"][-1]["content"] == READ_CODE_FIRST.format(repos="payments")
    assert reask["tool_choice"] == "required"
    assert counted(rig, "answered") == 1


def test_a_server_that_ignores_tools_gets_a_clear_not_an_answer_never_its_prose(rig: Rig) -> None:
    rig.model.set_handler(ignores_tools(PROSE))
    kind, fields, _ = ask(rig)
    assert kind == "failed" and fields["outcome"] == "not_an_answer"
    reply = str(fields["text"])
    assert texts.NOT_AN_ANSWER_PROSE in reply and "No code was read" in reply
    assert "--jinja" in reply and "codebot status" in reply and "Reference: `" in reply
    assert PROSE not in reply
    assert len(rig.model.requests) == 2  # the first turn and one re-ask: nothing more
    assert counted(rig, "not_an_answer") == 1 and counted(rig, "answered") == 0


def test_a_run_whose_every_call_names_a_made_up_repo_says_so_and_shows_each_call_as_failed(
    tmp_path: Path,
) -> None:
    for rig in build_rig(tmp_path, max_hops=3, model_max_retries=0):
        rig.model.set_handler(made_up_repos("acme-core", prose=PROSE))
        kind, fields, progress = ask(rig)
        assert kind == "failed" and fields["outcome"] == "not_an_answer"
        assert "every tool call the model made failed (no repo `acme-core`)" in str(fields["text"])
        assert PROSE not in str(fields["text"])
        assert progress and all("failed: no repo `acme-core`" in line for line in progress)
        assert not any(line.startswith("searching") and "failed" not in line for line in progress)


def test_a_run_whose_calls_all_fail_then_writes_prose_is_asked_again_then_told_no_code_was_read(
    rig: Rig,
) -> None:
    bad = tool_calls(("read_file", "{not json"))
    rig.model.enqueue(bad, text(PROSE), bad, text(PROSE))
    kind, fields, progress = ask(rig)
    assert kind == "failed" and fields["outcome"] == "not_an_answer"
    assert "every tool call the model made failed (2 call(s))" in str(fields["text"])
    assert len(rig.model.requests) == 4  # one re-ask after the first prose, none after the second
    assert len(progress) == 4 and all(
        "— failed: the tool answered with an error" in p for p in progress[1::2]
    )


@pytest.mark.parametrize("done", [True, False], ids=["with [DONE]", "connection closed"])
def test_a_stream_cut_half_way_is_asked_again_and_the_whole_reply_answers(rig: Rig, done: bool) -> None:
    rig.model.enqueue(READ_RETRY, cut_stream(text(CITED), done=done), text(CITED))
    kind, fields, _ = ask(rig)
    assert kind == "answer" and fields["outcome"] == "answered"
    assert "sleeping longer each time" in str(fields["markdown"])
    assert "Cut off" not in str(fields["markdown"])
    assert len(rig.model.requests) == 3


@pytest.mark.parametrize("done", [True, False], ids=["with [DONE]", "connection closed"])
def test_a_stream_cut_on_every_attempt_is_shown_with_a_cut_off_note_never_as_whole(
    rig: Rig, done: bool
) -> None:
    rig.model.enqueue(READ_RETRY)
    rig.model.set_handler(lambda _body: cut_stream(text(CITED), done=done))
    kind, fields, _ = ask(rig)
    assert kind == "answer" and fields["outcome"] == "cut_off"
    markdown = str(fields["markdown"])
    assert markdown.startswith("⚠️ **Cut off:**") and texts.CUT_OFF_END in markdown
    assert CITED[: len(CITED) // 2] in markdown or "It tries five times" in markdown
    assert "sleeping longer each time" not in markdown  # the half that never came is not made up
    assert len(rig.model.requests) == 1 + 3  # the read, then the answer and model_max_retries retries
    assert counted(rig, "cut_off") == 1


def test_a_reply_stopped_by_the_output_limit_is_a_cut_off_too(rig: Rig) -> None:
    rig.model.enqueue(READ_RETRY, text(CITED, finish_reason="length"))
    kind, fields, _ = ask(rig)
    assert kind == "answer" and fields["outcome"] == "cut_off"
    assert str(fields["markdown"]).startswith("⚠️ **Cut off:**")
    assert len(rig.model.requests) == 2  # the same limit would cut it again: not asked twice


def test_codebot_status_counts_each_outcome_kind(rig: Rig) -> None:
    rig.model.enqueue(READ_RETRY, text(CITED))
    ask(rig)
    rig.model.set_handler(ignores_tools(PROSE))
    ask(rig)
    assert {k: v for k, v in outcome_counts(rig.redis).items() if v} == {"answered": 1, "not_an_answer": 1}
    report = status_report(rig.redis, rig.runtime)
    assert "by outcome: answered 1, not an answer (no code read) 1, cut off 0, failed 0" in report


def test_an_endpoint_that_refuses_required_tools_gets_the_re_ask_as_an_instruction_it_accepts(
    tmp_path: Path,
) -> None:
    for rig in build_rig(tmp_path, model_options={"strict": {"tool_choice_required"}}):
        rig.model.enqueue(text(PROSE), READ_RETRY, text(CITED))
        kind, fields, _ = ask(rig)
        assert kind == "answer" and fields["outcome"] == "answered"
        sent = [r for r in rig.model.requests if r.get("tool_choice") != "required"]  # refused ones aside
        assert len(sent) == 3 and sent[1]["tool_choice"] == "auto"
        assert sent[1]["messages"][-1]["content"] == READ_CODE_FIRST.format(repos="payments")


@pytest.mark.rig(max_hops=2)
def test_a_run_that_spends_its_tool_rounds_without_an_answer_is_never_presented_as_one(rig: Rig) -> None:
    # the model keeps reading and, asked for the answer, writes nothing: what was read is shown
    rig.model.set_handler(lambda body: READ_RETRY if body.get("tool_choice") != "none" else text(""))
    kind, fields, _ = ask(rig)
    assert kind == "answer" and fields["outcome"] == "cut_off"  # ⚠️ on every platform, exit 4
    markdown = str(fields["markdown"])
    assert markdown.startswith("⚠️ **Cut off, not an answer:** the model used all its tool rounds (2)")
    assert "CODEBOT_MAX_HOPS" in markdown and "found nothing" not in markdown
    assert f"blob/{rig.sha}/payments/retry.py" in markdown  # the code it was reading, cited
    assert counted(rig, "cut_off") == 1 and counted(rig, "answered") == 0


@pytest.mark.rig(max_hops=2)
def test_a_run_stopped_before_any_file_was_shown_says_so_and_never_that_nothing_was_found(rig: Rig) -> None:
    listing = tool_calls(("list_repos", {}))  # code read (the repos in scope), no file shown
    rig.model.set_handler(lambda body: listing if body.get("tool_choice") != "none" else text(""))
    kind, fields, _ = ask(rig)
    assert kind == "answer" and fields["outcome"] == "cut_off"
    markdown = str(fields["markdown"])
    assert "**Cut off, not an answer:**" in markdown and "no file was read far enough to cite" in markdown
    assert "found nothing" not in markdown.lower()
