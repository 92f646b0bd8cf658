"""A Discord question written as a reply outside a thread ("@codebot why does this fail?" under a
pasted stack trace): the chain of messages it replied to reaches the model, read by the real
worker over REST from the question's own channel only; the real discord.py adapter takes the
reference from the gateway event."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import discord_payloads as p
from tests.support.discord_rig import DiscordRig

TRACE = (
    'Traceback (most recent call last):\n  File "payments/retry.py", line 9\nPaymentDeclined: card_expired'
)


def said(drig: DiscordRig, content: str, to: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    """A message in the guild channel, a reply to `to` when given (the bot not mentioned)."""
    reply = p.reply_fields(to, drig.fake.guild_id) if to is not None else {}
    return drig.fake.message_create(content, **reply, **kwargs)


def ask_in_reply(drig: DiscordRig, question: str, to: dict[str, Any], request: int = 0) -> tuple[str, str]:
    """The question, mentioning the bot in a reply to `to`, answered: the message of its first
    model request (the `request`th of the test), and the answer posted in its thread."""
    drig.script_answer("Five attempts, then it gives up [payments:payments/retry.py#L3].")
    asked = drig.mention(question, **p.reply_fields(to, drig.fake.guild_id))
    drig.queued()
    drig.work()
    (answer,) = drig.fake.posted(asked["id"])
    return str(drig.rig.model.requests[request]["messages"][-1]["content"]), str(answer["content"])


def test_a_reply_chain_of_three_messages_reaches_the_models_first_request_oldest_first(
    drig: DiscordRig,
) -> None:
    fake = drig.fake
    trace = said(drig, f"checkout fails:\n```{TRACE}```", author=fake.admin)
    prod = said(drig, "only on prod", to=trace)
    tuesday = said(drig, "since Tuesday's deploy", to=prod, author=fake.admin)
    first, _ = ask_in_reply(drig, "why does this fail?", tuesday)
    order = ["card_expired", "only on prod", "since Tuesday", "why does this fail?"]
    assert [first.index(words) for words in order] == sorted(first.index(words) for words in order)
    assert "The chain of chat messages this question replied to" in first
    assert f"--- {fake.admin['username']}:" in first and f"--- {fake.human['username']}:" in first
    # each message read shows the one it replied to: two requests for three messages
    assert len(fake.find("GET", rf"^/channels/{fake.channel_id}/messages/\d+$")) == 2


def another_channel(drig: DiscordRig) -> tuple[str, dict[str, Any]]:
    """A channel of the same guild the question was not asked in, and a secret said there."""
    fake = drig.fake
    other = p.snowflake()
    fake.channels[other] = p.text_channel(other, fake.guild_id, "private-ops")
    return other, fake.message_create("the prod db password is hunter2", channel=other, author=fake.admin)


def test_a_reference_into_another_channel_is_not_followed(drig: DiscordRig) -> None:
    fake = drig.fake
    other, secret = another_channel(drig)
    note = said(drig, "see what ops said", to=secret)  # Discord shows the secret in this reply
    first, _ = ask_in_reply(drig, "what does this mean?", note)
    assert "see what ops said" in first and "hunter2" not in first
    again, _ = ask_in_reply(drig, "and this?", secret, request=2)  # the question's own reference
    assert "hunter2" not in again and "replied to" not in again
    assert not fake.find("GET", f"/channels/{other}/messages")


def test_a_forward_from_another_channel_ends_the_chain_unread(drig: DiscordRig) -> None:
    fake = drig.fake
    other, secret = another_channel(drig)
    forward = {"type": 1, "message_id": secret["id"], "channel_id": other, "guild_id": fake.guild_id}
    snapshot = {k: v for k, v in secret.items() if k not in ("id", "channel_id", "author", "member")}
    forwarded = said(drig, "", message_reference=forward, message_snapshots=[{"message": snapshot}])
    look = said(drig, "look at this forward", to=forwarded)
    first, _ = ask_in_reply(drig, "why?", look)
    assert "look at this forward" in first and "hunter2" not in first
    assert not fake.find("GET", f"/channels/{other}/messages")


def test_a_deleted_message_in_the_chain_is_shown_to_the_model_as_deleted(drig: DiscordRig) -> None:
    fake = drig.fake
    oops = said(drig, "my token is hunter2, oops", author=fake.admin)
    fails = said(drig, "this fails since then", to=oops)
    fake.delete_message(oops["id"])
    first, _ = ask_in_reply(drig, "why?", fails)
    assert "hunter2" not in first
    assert first.index("[this message was deleted]") < first.index("this fails since then")


def test_a_reply_to_a_deleted_message_says_it_was_deleted(drig: DiscordRig) -> None:
    fake = drig.fake
    gone = said(drig, "a trace I regret posting: hunter2")
    fake.delete_message(gone["id"])  # the event's referenced_message is null
    first, _ = ask_in_reply(drig, "why does this fail?", gone)
    assert "hunter2" not in first
    assert first.index("[this message was deleted]") < first.index("why does this fail?")


def test_the_bots_own_message_in_the_chain_is_left_out_and_the_chain_goes_on_through_it(
    drig: DiscordRig,
) -> None:
    fake = drig.fake
    trace = said(drig, f"```{TRACE}```", author=fake.admin)
    mine = said(drig, "BOT-ANSWER: it is the retry", to=trace, author=fake.bot_user)
    first, _ = ask_in_reply(drig, "are you sure?", mine)
    assert "BOT-ANSWER" not in first
    assert first.index("card_expired") < first.index("are you sure?")


@pytest.mark.drig(thread_context_messages=3)
def test_a_chain_longer_than_the_budget_keeps_its_first_and_newest_messages_with_a_note(
    drig: DiscordRig,
) -> None:
    message = said(drig, "step 1: the trace")
    for step in range(2, 7):
        message = said(drig, f"step {step}: more", to=message)
    first, answer = ask_in_reply(drig, "so why?", message)
    assert "step 1: the trace" in first and "step 5" in first and "step 6" in first
    assert not any(f"step {step}" in first for step in (2, 3, 4))
    assert "[3 earlier message(s) of this reply chain were left out" in first
    assert answer.startswith("_This reply chain is long: I read its first message and the newest 2;")


def test_a_chain_the_bot_cannot_read_still_gets_its_answer_with_a_line_saying_so(drig: DiscordRig) -> None:
    fake = drig.fake
    trace = said(drig, "a trace")
    fake.refuse(5, "GET", f"/channels/{fake.channel_id}/messages/")  # no Read Message History
    drig.script_answer("Five attempts [payments:payments/retry.py#L3].")
    asked = drig.mention("how many attempts?", **p.reply_fields(trace, fake.guild_id))
    drig.queued()
    drig.work()
    (answer,) = fake.posted(asked["id"])  # the answer's thread has the question's id
    assert answer["content"].startswith("_I could not read the messages you replied to")
    assert "Five attempts" in answer["content"]


LOG = b"10:00:02 DEBUG token ghp_" + b"e5F6" * 9 + b"\nPaymentDeclined: card_expired\n"


def test_a_log_attached_to_a_message_of_the_chain_reaches_the_model_redacted(drig: DiscordRig) -> None:
    fake = drig.fake
    trace = said(drig, "checkout fails, log attached", attachments=[fake.attachment("ci.log", LOG)])
    first, answer = ask_in_reply(drig, "why does this fail?", said(drig, "only on prod", to=trace))
    assert 'attached file "ci.log":' in first and "PaymentDeclined: card_expired" in first
    assert first.index("log attached") < first.index("card_expired") < first.index("why does this fail?")
    assert "e5F6e5F6" not in str(drig.rig.model.requests)
    assert "Five attempts" in answer


def test_a_file_attached_to_the_reply_that_asks_reaches_the_model_beside_its_chain(drig: DiscordRig) -> None:
    fake = drig.fake
    trace = said(drig, f"checkout fails:\n```{TRACE}```", author=fake.admin)
    drig.script_answer("Five attempts, then it gives up [payments:payments/retry.py#L3].")
    asked = drig.mention(
        "why does this fail?",
        attachments=[fake.attachment("ci.log", LOG)],
        **p.reply_fields(trace, fake.guild_id),
    )
    drig.queued()
    drig.work()
    first = str(drig.rig.model.requests[0]["messages"][-1]["content"])
    assert "The chain of chat messages this question replied to" in first and "card_expired" in first
    assert 'attached file "ci.log":' in first
    assert fake.find("GET", f"/channels/{fake.channel_id}/messages/{asked['id']}$")
    (answer,) = fake.posted(asked["id"])
    assert "Five attempts" in answer["content"]
