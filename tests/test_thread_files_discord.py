"""Files in the thread are context on Discord: an attachment of a thread's message, or of the
mention itself, is downloaded by the real worker from the fake Discord's CDN (without any
token) and reaches the model, redacted; a file not read is named in the answer's first lines."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import discord_payloads as p
from tests.support.discord_rig import DiscordRig
from tests.support.file_host import ForeignHost

TOKEN = "ghp_" + "e5F6" * 9
LOG = f"10:00:02 DEBUG token {TOKEN}\nPaymentDeclined: card_expired\n".encode()
ANSWER = "The retry gives up [payments:payments/retry.py#L3]."


def thread_with(drig: DiscordRig, words: str, attachments: list[dict[str, Any]]) -> str:
    """A thread started from a message, with a reply carrying `attachments`; its id."""
    fake = drig.fake
    root = fake.message_create("checkout is red", author=fake.admin)
    fake.channels[root["id"]] = p.thread(
        root["id"], fake.channel_id, fake.guild_id, fake.admin["id"], "x", 1440
    )
    fake.dispatch("THREAD_CREATE", {**fake.channels[root["id"]], "newly_created": True})
    fake.message_create(words, channel=root["id"], attachments=attachments)
    return str(root["id"])


def ask(drig: DiscordRig, question: str, channel: str | None = None, **extra: Any) -> dict[str, Any]:
    drig.script_answer(ANSWER)
    asked = drig.mention(question, **({"channel": channel} if channel else {}), **extra)
    drig.queued()
    drig.work()
    return asked


def first_request(drig: DiscordRig) -> str:
    return str(drig.rig.model.requests[0]["messages"][-1]["content"])


def test_a_log_attached_in_the_thread_reaches_the_model_redacted_and_no_token_goes_with_its_download(
    drig: DiscordRig,
) -> None:
    thread = thread_with(drig, "log attached", [drig.fake.attachment("checkout.log", LOG)])
    ask(drig, "why does this fail?", channel=thread)
    first = first_request(drig)
    assert 'attached file "checkout.log":' in first and "PaymentDeclined: card_expired" in first
    assert first.index("log attached") < first.index("card_expired") < first.index("why does this fail?")
    assert "e5F6e5F6" not in str(drig.rig.model.requests)
    assert [r.authorization for r in drig.fake.files.requests] == [""]


def test_an_attachment_on_a_foreign_host_gets_no_request_and_a_line(drig: DiscordRig) -> None:
    foreign = ForeignHost()
    try:
        theirs = {**drig.fake.attachment("theirs.log", b"x"), "url": foreign.put("/t.log", b"stolen\n")}
        thread = thread_with(drig, "a log", [theirs])
        ask(drig, "what does it say?", channel=thread)
        assert foreign.store.requests == []
    finally:
        foreign.close()
    (answer,) = drig.fake.posted(thread)
    assert answer["content"].startswith(
        "_I did not read `theirs.log`: it is not on the chat platform's own file host._"
    )
    assert "stolen" not in first_request(drig)


def test_a_binary_attachment_is_named_as_unread_and_the_question_answered(drig: DiscordRig) -> None:
    thread = thread_with(drig, "crash", [drig.fake.attachment("core.dump", b"\x00\x01" * 500, "")])
    ask(drig, "why did it crash?", channel=thread)
    (answer,) = drig.fake.posted(thread)
    assert answer["content"].startswith("_I did not read `core.dump`: it is not a text file._")
    assert "The retry gives up" in answer["content"]


@pytest.mark.drig(thread_context_file_seconds=1.0)
def test_downloads_failing_by_404_403_and_timeout_each_get_a_line_and_the_question_its_answer(
    drig: DiscordRig,
) -> None:
    fake = drig.fake
    gone, refused, slow = (
        fake.attachment(name, b"text\n") for name in ("gone.log", "refused.log", "slow.log")
    )
    fake.files.fail(gone["url"], 404)
    fake.files.fail(refused["url"], 403)
    fake.files.hang(slow["url"])
    thread = thread_with(drig, "three logs", [gone, refused, slow])
    ask(drig, "what do they say?", channel=thread)
    (answer,) = fake.posted(thread)
    assert answer["content"].splitlines()[:3] == [
        "_I could not read `gone.log`: the platform no longer has it (404)._",
        "_I could not read `refused.log`: the platform refused to give it (403)._",
        "_I could not read `slow.log`: its download timed out._",
    ]
    assert "The retry gives up" in answer["content"]


def test_a_file_attached_to_the_top_level_mention_itself_reaches_the_model(drig: DiscordRig) -> None:
    asked = ask(drig, "why does this fail?", attachments=[drig.fake.attachment("ci.log", LOG)])
    first = first_request(drig)
    assert 'attached file "ci.log":' in first and "PaymentDeclined: card_expired" in first
    assert drig.fake.find("GET", f"/channels/{drig.fake.channel_id}/messages/{asked['id']}$")
    (answer,) = drig.fake.posted(asked["id"])  # in the thread started from the question
    assert "The retry gives up" in answer["content"]
