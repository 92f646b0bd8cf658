"""The thread is the context on Discord: a question asked in a thread brings the message the
thread was started from and the thread's earlier messages (REST, read by the real worker) to
the model; the bot's own answers and questions it already answered stay thread memory."""

from __future__ import annotations

from tests.support.discord_rig import DiscordRig

TRACE = (
    'Traceback (most recent call last):\n  File "payments/retry.py", line 9\nPaymentDeclined: card_expired'
)


def test_a_stack_trace_a_thread_was_started_from_reaches_the_models_first_request(drig: DiscordRig) -> None:
    fake = drig.fake
    root = drig.thread_from(f"checkout fails:\n```{TRACE}```")
    fake.message_create("only on prod", channel=root["id"])
    drig.script_answer("The retry gives up [payments:payments/retry.py#L3].")
    drig.mention("what raises this?", channel=root["id"])
    drig.queued()
    drig.work()
    first = drig.rig.model.requests[0]["messages"][-1]["content"]
    assert "PaymentDeclined: card_expired" in first and "only on prod" in first
    assert first.index("card_expired") < first.index("only on prod") < first.index("what raises this?")
    assert f"--- {fake.admin['username']}:" in first


def test_a_deleted_message_of_the_thread_is_not_sent(drig: DiscordRig) -> None:
    fake = drig.fake
    root = drig.thread_from("the build is red")
    gone = fake.message_create("my password is hunter2, oops", channel=root["id"])
    fake.delete_message(gone["id"])
    drig.script_answer("It is red [payments:payments/retry.py#L3].")
    drig.mention("why is it red?", channel=root["id"])
    drig.queued()
    drig.work()
    first = drig.rig.model.requests[0]["messages"][-1]["content"]
    assert "the build is red" in first and "hunter2" not in first


def test_a_thread_the_bot_cannot_read_still_gets_its_answer_with_a_line_saying_so(drig: DiscordRig) -> None:
    fake = drig.fake
    root = drig.thread_from("a trace")
    fake.refuse(5, "GET", f"/channels/{root['id']}/messages$")  # no Read Message History
    drig.script_answer("Five attempts [payments:payments/retry.py#L3].")
    drig.mention("how many attempts?", channel=root["id"])
    drig.queued()
    drig.work()
    (answer,) = fake.posted(root["id"])
    assert answer["content"].startswith("_I could not read the earlier messages of this thread")
    assert "Five attempts" in answer["content"]
