"""✅ in chat only for an answer from code the run read; ⚠️ and a clear reply otherwise.

Through the real adapters (the Slack app over signed HTTP, discord.py on the fake gateway), a
real burst worker, the embedded Redis and the scripted model; what the asker sees is read from
the fake Slack Web API and the fake Discord REST API.
"""

from __future__ import annotations

import pytest

from tests.support.discord_rig import DiscordRig
from tests.support.model_server import cut_stream, ignores_tools, made_up_repos, text, tool_calls
from tests.support.slack_rig import SlackRig

READ_RETRY = tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}))
CITED = "It tries five times [payments:payments/retry.py#L3], sleeping longer each time [payments:payments/retry.py#L12]."
PROSE = "Retries are usually handled with exponential backoff in the client."
STREAMING = {"slack_streaming": True, "slack_stream_interval_seconds": 0.05}


def slack_reply(rig: SlackRig, question: str = "how does retry work?") -> tuple[str, str, list[str]]:
    ts = rig.mention(question)
    rig.settle()
    rig.work()
    (reply,) = rig.api.thread_texts("C1", ts)
    return ts, reply, rig.api.reactions("C1", ts)


@pytest.mark.rig("slack")
def test_slack_a_prose_only_model_gets_a_warning_and_the_no_code_read_reply_not_its_prose(
    rig: SlackRig,
) -> None:
    rig.model.set_handler(ignores_tools(PROSE))
    _, reply, reactions = slack_reply(rig)
    assert reactions == ["warning"]
    assert "No code was read" in reply and "Reference: `" in reply and "--jinja" in reply
    assert "backoff in the client" not in reply
    assert rig.api.calls_to("chat.postMessage")[-1].body.get("blocks") in (None, [])  # no feedback


@pytest.mark.rig("slack", **STREAMING)
def test_slack_a_code_read_answer_after_a_prose_first_turn_gets_the_check_mark(rig: SlackRig) -> None:
    rig.model.enqueue(text(PROSE), READ_RETRY, text(CITED))
    _, reply, reactions = slack_reply(rig)
    assert reactions == ["white_check_mark"]
    assert f"blob/{rig.sha}/payments/retry.py#L12" in reply and "backoff in the client" not in reply
    assert rig.api.calls_to("chat.startStream")  # streamed: the prose shown live was replaced


@pytest.mark.parametrize(
    "rig",
    [
        pytest.param(None, marks=pytest.mark.rig("slack", model_max_retries=1), id="edits"),
        pytest.param(None, marks=pytest.mark.rig("slack", model_max_retries=1, **STREAMING), id="streamed"),
    ],
    indirect=True,
)
def test_slack_a_reply_cut_on_every_attempt_shows_the_cut_off_note_and_a_warning(rig: SlackRig) -> None:
    rig.model.enqueue(READ_RETRY)
    rig.model.set_handler(lambda _body: cut_stream(text(CITED), done=False))
    _, reply, reactions = slack_reply(rig)
    assert reactions == ["warning"]
    assert reply.startswith("⚠️ *Cut off:*") and "cut off here" in reply
    assert "sleeping longer each time" not in reply
    assert bool(rig.api.calls_to("chat.startStream")) == rig.settings.slack_streaming


@pytest.mark.rig("slack", max_hops=2, **STREAMING)
def test_slack_task_cards_show_calls_on_a_made_up_repo_as_failed_never_as_searched(rig: SlackRig) -> None:
    rig.model.set_handler(made_up_repos("acme-core", prose=PROSE))
    _, reply, reactions = slack_reply(rig)
    assert reactions == ["warning"]
    assert "every tool call the model made failed (no repo `acme-core`)" in reply
    cards = [
        (chunk["id"], chunk["title"], chunk["status"])
        for call in rig.api.calls
        if call.method in ("chat.startStream", "chat.appendStream", "chat.stopStream")
        for chunk in call.body.get("chunks") or []
        if chunk["type"] == "task_update"
    ]
    assert cards and all("failed: no repo `acme-core`" in title for _id, title, _status in cards)
    last = {card: status for card, _title, status in cards}  # each card's last state: failed
    assert set(last.values()) == {"error"}


@pytest.mark.rig("slack", max_hops=2)
def test_slack_progress_lines_show_a_call_on_a_made_up_repo_as_failed(rig: SlackRig) -> None:
    rig.model.set_handler(made_up_repos("acme-core", prose=PROSE))
    slack_reply(rig)
    shown = [call.body["text"] for call in rig.api.calls_to("chat.update")][:-1]  # the progress edits
    assert shown and all("searching" not in line or "failed: no repo `acme-core`" in line for line in shown)


def discord_reply(drig: DiscordRig) -> tuple[str, list[tuple[str, str]]]:
    question = drig.mention("how does retry work?")
    drig.queued()
    drig.work()
    (reply,) = drig.fake.posted(question["id"])
    return str(reply["content"]), drig.reactions(question["id"])


def test_discord_a_prose_only_model_gets_a_warning_and_the_no_code_read_reply(drig: DiscordRig) -> None:
    drig.rig.model.set_handler(ignores_tools(PROSE))
    reply, reactions = discord_reply(drig)
    assert "No code was read" in reply and "backoff in the client" not in reply
    assert ("PUT", "⚠️") in reactions and ("PUT", "✅") not in reactions


@pytest.mark.drig(model_max_retries=1)
def test_discord_a_cut_off_reply_is_shown_cut_off_with_a_warning(drig: DiscordRig) -> None:
    drig.rig.model.enqueue(READ_RETRY)
    drig.rig.model.set_handler(lambda _body: cut_stream(text(CITED), done=True))
    reply, reactions = discord_reply(drig)
    assert reply.startswith("⚠️ **Cut off:**") and "cut off here" in reply
    assert ("PUT", "⚠️") in reactions and ("PUT", "✅") not in reactions


def test_discord_a_code_read_answer_gets_the_check_mark(drig: DiscordRig) -> None:
    drig.script_answer(CITED)
    reply, reactions = discord_reply(drig)
    assert f"/blob/{drig.rig.sha}/payments/retry.py#L3" in reply
    assert ("PUT", "✅") in reactions and ("PUT", "⚠️") not in reactions


@pytest.mark.drig(max_hops=2, discord_step_line_after_seconds=0.0, discord_edit_interval_seconds=0.0)
def test_discord_the_live_view_names_a_call_on_a_made_up_repo_as_failed(drig: DiscordRig) -> None:
    drig.rig.model.set_handler(made_up_repos("acme-core", prose=PROSE))
    reply, reactions = discord_reply(drig)
    assert "no repo `acme-core`" in reply and ("PUT", "⚠️") in reactions
    edits = [str(call.body.get("content", "")) for call in drig.fake.find("PATCH", r"/messages/\d+$")]
    named = [edit for edit in edits if "acme-core" in edit and edit != reply]
    assert named and all("failed: no repo `acme-core`" in edit for edit in named)
