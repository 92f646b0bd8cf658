"""What wakes the bot on Discord and where it answers: the real discord.py adapter on a fake
gateway, the real worker (embedded Redis, burst RQ worker, scripted model) posting over REST."""

from __future__ import annotations

import pytest

from bot import texts
from tests.support.discord_payloads import snowflake, user
from tests.support.discord_rig import DiscordRig
from worker.jobs.queue import questions_queue, queue_depth
from worker.ops.redis_connection import ensure_embedded_server, stop_embedded_server


def test_a_mention_gets_eyes_a_thread_the_answer_and_a_check_mark(drig: DiscordRig) -> None:
    fake = drig.fake
    drig.script_answer("Retries back off exponentially [payments:payments/retry.py#L6-L12].")
    question = drig.mention("how does retry work?")
    drig.queued()
    drig.work()
    thread = fake.channels[question["id"]]
    assert thread["type"] == 11 and thread["parent_id"] == fake.channel_id
    assert thread["name"] == "how does retry work?"
    [answer] = fake.posted(question["id"])  # the progress message, replaced by the answer
    assert answer["content"].startswith(
        "Retries back off exponentially [payments:payments/retry.py#L6-L12](<https://"
    )
    assert answer["embeds"][0]["title"] == "Sources"
    assert drig.reactions(question["id"])[0] == ("PUT", "👀")
    assert drig.reactions(question["id"])[-2:] == [("PUT", "✅"), ("DELETE", "👀")]
    assert fake.posted(fake.channel_id) == []  # nothing at the top level of the channel


def test_a_mention_saying_only_hi_gets_the_help_as_a_reply_and_nothing_is_queued(drig: DiscordRig) -> None:
    fake = drig.fake
    greeting = drig.mention("hi")
    [reply] = fake.wait_for(lambda: fake.posted(fake.channel_id))
    assert reply["content"].startswith("Ask me about the code") and "/codebot repos" in reply["content"]
    assert str(reply["message_reference"]["message_id"]) == greeting["id"]
    assert queue_depth(drig.rig.redis) == 0


def test_messages_without_a_mention_and_edits_are_ignored(drig: DiscordRig) -> None:
    fake = drig.fake
    plain = fake.message_create("how does retry work?")
    edited = {**plain, "content": f"<@{fake.bot_id}> how does retry work?", "mentions": [fake.bot_user]}
    fake.dispatch("MESSAGE_UPDATE", edited)
    last = drig.mention("a real question")  # handled after the two above
    drig.acked(last)
    assert questions_queue(drig.rig.redis).job_ids == [f"q-discord-{last['id']}"]
    assert drig.reactions(plain["id"]) == []
    assert [c.path for c in fake.find("PUT", "/reactions/")] == [
        f"/channels/{fake.channel_id}/messages/{last['id']}/reactions/👀/@me"
    ]


def test_everyone_here_role_mentions_and_other_bots_do_not_wake_the_bot(drig: DiscordRig) -> None:
    fake = drig.fake
    role = snowflake()
    fake.message_create("@everyone standup in 5", mention_everyone=True)
    fake.message_create("@here anyone?", mention_everyone=True)
    fake.message_create(f"<@&{role}> please review", mention_roles=[role])
    fake.message_create(f"<@{fake.bot_id}> ping", author=user("otherbot", bot=True), mentions=[fake.bot_user])
    drig.acked(drig.mention("the only question"))
    assert queue_depth(drig.rig.redis) == 1
    assert len(fake.find("PUT", "/reactions/")) == 1
    assert fake.find("POST", "/messages$") == []


def test_a_direct_message_is_answered_with_a_reply_reference_not_a_thread(drig: DiscordRig) -> None:
    fake = drig.fake
    dm = fake.open_dm()
    drig.script_answer("Five attempts [payments:payments/retry.py#L3].")
    question = fake.message_create("how many attempts does retry make?", channel=dm)
    drig.queued()
    drig.work()
    [reply] = fake.posted(dm)
    assert reply["content"].startswith("Five attempts")
    assert reply["message_reference"] == {
        "message_id": question["id"],
        "channel_id": dm,
        "fail_if_not_exists": False,
    }
    assert reply["allowed_mentions"] == {"parse": [], "replied_user": False}
    assert fake.find("POST", "/threads$") == []
    assert ("PUT", "✅") in drig.reactions(question["id"])


@pytest.mark.parametrize("adapter_saw_the_thread", [True, False])
def test_a_follow_up_in_the_bots_thread_carries_the_thread_history(
    drig: DiscordRig, adapter_saw_the_thread: bool
) -> None:
    fake = drig.fake
    fake.announce_threads = adapter_saw_the_thread  # False: the adapter restarted and never saw it
    drig.script_answer("Retries back off exponentially [payments:payments/retry.py#L6-L12].")
    first = drig.mention("how does retry work?")
    drig.queued()
    drig.work()
    drig.script_answer("Five of them [payments:payments/retry.py#L3].")
    fake.message_create("and how many attempts?", channel=first["id"])  # no mention needed here
    drig.queued()
    drig.work()
    sent = [m["content"] for m in drig.rig.model.requests[-2]["messages"]]
    assert sent[1:4] == ["how does retry work?", sent[2], "and how many attempts?"]
    assert sent[2].startswith("Retries back off exponentially")
    assert [m["content"][:12] for m in fake.posted(first["id"])] == ["Retries back", "Five of them"]


def test_the_same_message_delivered_twice_is_answered_once(drig: DiscordRig) -> None:
    fake = drig.fake
    drig.script_answer("Retries back off [payments:payments/retry.py#L6-L12].")
    drig.script_answer("Five attempts [payments:payments/retry.py#L3].")
    question = drig.mention("how does retry work?")
    fake.dispatch("MESSAGE_CREATE", question)  # a gateway replay of the same message
    drig.mention("how many attempts?")
    drig.queued(2)
    drig.work()
    assert len(fake.find("POST", f"/messages/{question['id']}/threads$")) == 1
    assert len(fake.posted(question["id"])) == 1
    assert len(drig.rig.model.requests) == 4  # two questions, two model calls each
    assert drig.reactions(question["id"]).count(("PUT", "✅")) == 1


def test_with_redis_down_the_asker_is_told_and_the_adapter_recovers(drig: DiscordRig) -> None:
    fake = drig.fake
    stop_embedded_server(drig.settings)  # an operator's stop: not undone by the adapter's healing
    lost = drig.mention("how does retry work?")
    [reply] = fake.wait_for(lambda: fake.posted(fake.channel_id))
    assert reply["content"] == texts.QUEUE_UNAVAILABLE
    assert str(reply["message_reference"]["message_id"]) == lost["id"]
    assert reply["allowed_mentions"] == {"parse": [], "replied_user": False}
    ensure_embedded_server(drig.settings)  # Redis is back
    drig.mention("how does retry work, now?")
    drig.queued()
    assert drig.bot.client.is_ready() and not drig.bot.client.is_closed()


def test_with_redis_refusing_writes_the_asker_is_told_so(drig: DiscordRig) -> None:
    fake, redis = drig.fake, drig.rig.redis
    redis.config_set("maxmemory-policy", "noeviction")
    redis.config_set("maxmemory", "1")  # every write now fails: OOM command not allowed
    try:
        refused = drig.mention("how does retry work?")
        [reply] = fake.wait_for(lambda: fake.posted(fake.channel_id))
    finally:
        redis.config_set("maxmemory", "0")
    assert reply["content"] == texts.QUEUE_REFUSES_WRITES
    assert str(reply["message_reference"]["message_id"]) == refused["id"]
    drig.mention("how does retry work, now?")
    drig.queued()
