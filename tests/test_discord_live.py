"""Discord answers appear as they are written (bot/discord/live.py): the progress message is
edited as the text grows, at most one edit per `discord_edit_interval_seconds`, 429s honoured,
a typing indicator while tools run, a step line only for a tool still running after
`discord_step_line_after_seconds`; the answer ends with 👍/👎 buttons whose clicks (and the 👎
reason modal) the adapter handles over the real gateway (bot/discord/feedback.py)."""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tests.support import discord_payloads as payloads
from tests.support.discord_rig import DiscordRig
from tests.support.fake_discord import EPHEMERAL
from tests.support.model_server import paced, text, tool_calls
from worker.jobs import feedback
from worker.jobs import runtime as runtime_module
from worker.jobs.feedback_cli import run_export
from worker.tools import TOOL_FUNCTIONS, ToolRegistry, ToolResult
from worker.tools.files import read_file

INTERVAL = 0.3
pytestmark = pytest.mark.drig(discord_edit_interval_seconds=INTERVAL)
ANSWER = (
    "The payments service retries a failed call up to five times [payments:payments/retry.py#L3]. "
    "After each ConnectionError it sleeps twice as long as before, starting at half a second "
    "[payments:payments/retry.py#L6-L12]. When every attempt failed it gives up with a RuntimeError, "
    "so the caller sees one clear error instead of a hang."
)
STEP = "reading `payments/retry.py`"  # what the message says while read_file runs long enough


def ask(
    drig: DiscordRig, pace: float = 0.03, answer: str = ANSWER, question: str = "how does retry work?"
) -> dict[str, Any]:
    drig.rig.model.enqueue(
        tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"})),
        paced(pace, text(answer)),
    )
    asked = drig.mention(question)
    drig.acked(asked)
    drig.work()
    return asked


def answer_message(drig: DiscordRig, asked: dict[str, Any]) -> dict[str, Any]:
    (message,) = drig.fake.posted(asked["id"])  # in the thread started from the question
    return message


def is_answer_text(content: str) -> bool:
    """A live edit showing the start of ANSWER followed by the writing mark."""
    shown = content.removesuffix(" …")
    return content.endswith(" …") and bool(shown) and ANSWER.startswith(shown)


def test_an_answer_is_seen_growing_by_edits_no_closer_than_the_interval(drig: DiscordRig) -> None:
    asked = ask(drig)
    message = answer_message(drig, asked)
    growing = [s.removesuffix(" …") for s in drig.fake.states(message["id"]) if s.endswith(" …")]
    assert len(growing) >= 3, drig.fake.states(message["id"])
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(growing))
    assert message["content"].startswith("The payments service retries") and not message["content"].endswith(
        "…"
    )
    live_edits = [
        c for c in drig.fake.find("PATCH", f"/messages/{message['id']}$") if c.body["content"].endswith(" …")
    ]
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(live_edits)]
    assert min(gaps) >= INTERVAL, gaps
    assert all(c.body["allowed_mentions"]["parse"] == [] for c in live_edits)


def test_a_quick_tool_shows_as_typing_only_so_the_first_edit_already_carries_the_answer(
    drig: DiscordRig,
) -> None:
    asked = ask(drig)  # read_file on a small file: milliseconds
    message = answer_message(drig, asked)
    calls = drig.fake.calls
    typing = next(i for i, c in enumerate(calls) if c.path == f"/channels/{asked['id']}/typing")
    edits = [
        i
        for i, c in enumerate(calls)
        if c.method == "PATCH" and c.path.endswith(f"/messages/{message['id']}")
    ]
    assert typing < edits[0]
    assert is_answer_text(calls[edits[0]].body["content"])  # no step edit came first
    assert not any(STEP in state for state in drig.fake.states(message["id"]))


def step_shown(drig: DiscordRig) -> bool:
    return any(STEP in call.body.get("content", "") for call in drig.fake.find("PATCH", "/messages/"))


@contextmanager
def slow_read_file(drig: DiscordRig, until: Callable[[], bool]) -> Iterator[list[float]]:
    """The worker's read_file runs until `until()` holds (a slow disk, a big file; at most 60 s,
    a hang guard); yields the times it returned. The runtime's registry is swapped for the
    test; the live view is untouched."""
    returned: list[float] = []

    @functools.wraps(read_file)
    def slow(*args: Any, **kwargs: Any) -> ToolResult:
        give_up = time.monotonic() + 60
        while not until() and time.monotonic() < give_up:
            time.sleep(0.05)
        try:
            return read_file(*args, **kwargs)
        finally:
            returned.append(time.monotonic())

    functions = [slow if f is read_file else f for f in TOOL_FUNCTIONS]
    runtime_module.install(dataclasses.replace(drig.rig.runtime, registry=ToolRegistry(functions)))
    try:
        yield returned
    finally:
        runtime_module.install(drig.rig.runtime)


@pytest.mark.drig(discord_edit_interval_seconds=INTERVAL, discord_step_line_after_seconds=0.2)
def test_a_slow_tool_is_named_in_the_message_while_it_runs_and_the_answer_replaces_it(
    drig: DiscordRig,
) -> None:
    # the tool runs until its step is shown, however long a busy machine takes to show it: if it
    # never is, the tool returns after the guard and the order below fails
    with slow_read_file(drig, until=lambda: step_shown(drig)) as returned:
        asked = ask(drig)
    message = answer_message(drig, asked)
    edits = drig.fake.find("PATCH", f"/messages/{message['id']}$")
    step = next(c for c in edits if STEP in c.body["content"])
    assert step.body["content"] == f"Looking into the code… {STEP} from L1 in payments"
    assert step.at < returned[0]  # shown while the tool was still running
    assert edits.index(step) == 0 and is_answer_text(edits[1].body["content"])
    assert drig.fake.find("POST", f"/channels/{asked['id']}/typing$")[0].at < step.at


def test_an_edit_refused_with_429_waits_as_long_as_discord_says(drig: DiscordRig) -> None:
    drig.fake.rate_limit(1, 1.0, "PATCH", "/messages/")
    asked = ask(drig, pace=0.01)
    message = answer_message(drig, asked)
    patches = drig.fake.find("PATCH", f"/messages/{message['id']}$")
    limited = next(i for i, call in enumerate(patches) if call.status == 429)
    assert patches[limited + 1].at - patches[limited].at >= 1.0
    assert message["content"].startswith("The payments service retries")


def test_a_thumbs_up_click_is_stored_once_and_thanked_privately(drig: DiscordRig) -> None:
    message = answer_message(drig, ask(drig, pace=0.0))
    question_id = message["components"][0]["components"][0]["custom_id"].split(":", 3)[3]
    for _click in range(2):
        drig.fake.click(message, "👍")
    thanks = drig.fake.wait_for(
        lambda: [c for c in drig.fake.find("POST", "/callback$") if c.body["type"] == 4][1:]
    )
    assert all(c.body["data"]["flags"] & EPHEMERAL for c in thanks)
    (vote,) = feedback.votes_of(drig.rig.redis, question_id)
    assert (vote.vote, vote.user, vote.platform) == ("up", drig.fake.human["id"], "discord")


def test_a_thumbs_down_opens_a_modal_whose_reason_is_kept_with_the_vote(drig: DiscordRig) -> None:
    message = answer_message(drig, ask(drig, pace=0.0))
    drig.fake.click(message, "👍")
    drig.fake.click(message, "👎")  # changing one's mind replaces the vote
    (modal,) = drig.fake.wait_for(lambda: drig.fake.modals)
    drig.fake.submit_modal(modal["custom_id"], {"reason": "It missed the jitter."})
    question_id = modal["custom_id"].removeprefix("codebot:fbr:")
    drig.fake.wait_for(lambda: feedback.votes_of(drig.rig.redis, question_id)[0].reason)
    (vote,) = feedback.votes_of(drig.rig.redis, question_id)
    assert (vote.vote, vote.reason) == ("down", "It missed the jitter.")


def test_every_edit_of_a_growing_answer_is_redacted_and_its_citations_checked(drig: DiscordRig) -> None:
    secret = "AKIAQWERTYUIOPASDFGHJ"
    lookalike = "[payments\uff1apayments/retry.py#L3](https://evil.example/x)"  # fullwidth colon
    asked = ask(drig, answer=f"{ANSWER} The key is {secret}; see {lookalike} for more. That is all.")
    message = answer_message(drig, asked)
    states = drig.fake.states(message["id"])
    assert len([s for s in states if s.endswith(" …")]) >= 3
    assert not any(secret in s or "](https://evil.example" in s or "](<https://evil" in s for s in states)
    final = message["content"]
    assert "[REDACTED:" in final and "That is all." in final
    assert "/payments/retry.py#L3" in final  # the real citation is a link to the commit read


def test_discord_feedback_round_trips_into_codebot_feedback_export(drig: DiscordRig, tmp_path: Path) -> None:
    liked = answer_message(drig, ask(drig, pace=0.0))
    disliked = answer_message(drig, ask(drig, pace=0.0, question="does it ever give up?"))
    drig.fake.click(liked, "👍")
    drig.fake.click(disliked, "👎")
    (modal,) = drig.fake.wait_for(lambda: drig.fake.modals)
    drig.fake.submit_modal(modal["custom_id"], {"reason": "It does give up."})
    question_id = modal["custom_id"].removeprefix("codebot:fbr:")
    drig.fake.wait_for(lambda: feedback.votes_of(drig.rig.redis, question_id)[0].reason)
    exported = tmp_path / "feedback.jsonl"
    assert run_export(drig.rig.redis, str(exported), Console(record=True)) == 0
    rows = {row["question"]: row for row in map(json.loads, exported.read_text().splitlines())}
    assert rows["how does retry work?"]["expected_files"] == ["payments/retry.py"]
    flagged = rows["does it ever give up?"]
    assert flagged["flagged"] and flagged["reasons"] == ["It does give up."]
    assert flagged["rejected_files"] == ["payments/retry.py"]


def test_a_click_with_a_forged_button_id_stores_nothing(drig: DiscordRig) -> None:
    message = answer_message(drig, ask(drig, pace=0.0))
    forged = copy.deepcopy(message)
    button = forged["components"][0]["components"][0]
    question_id = button["custom_id"].split(":", 3)[3]
    button["custom_id"] = f"codebot:fb:maybe:{question_id}"
    drig.fake.click(forged, "👍", user=payloads.user("mallory"))
    drig.fake.click(message, "👎")  # handled after the forged one: that one had its turn
    drig.fake.wait_for(lambda: drig.fake.modals)
    votes = feedback.votes_of(drig.rig.redis, question_id)
    assert [(v.vote, v.user) for v in votes] == [("down", drig.fake.human["id"])]


def test_a_vote_clicked_in_another_channel_than_its_answer_is_not_stored(drig: DiscordRig) -> None:
    message = answer_message(drig, ask(drig, pace=0.0))
    question_id = message["components"][0]["components"][0]["custom_id"].split(":", 3)[3]
    elsewhere = copy.deepcopy(message)
    elsewhere["channel_id"] = drig.fake.open_dm()  # the same button value, clicked in a DM
    drig.fake.click(elsewhere, "👎", user=payloads.user("mallory"))
    refusal = drig.fake.wait_for(
        lambda: [c for c in drig.fake.find("POST", "/callback$") if c.body["type"] == 4]
    )
    assert "too old" in refusal[0].body["data"]["content"] and drig.fake.modals == []
    assert feedback.votes_of(drig.rig.redis, question_id) == []
