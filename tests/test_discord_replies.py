"""How the worker posts on Discord over REST: long answers, inert mentions, 429s, retried jobs."""

from __future__ import annotations

import re

import pytest

from bot.discord.sink import MESSAGES_KEY_PREFIX, DiscordSink
from tests.support.discord_rig import DiscordRig, asked_question
from tests.support.model_server import error
from worker.jobs.sink import Answer, DeliveryFailed

FENCE = re.compile(r"^```", re.MULTILINE)
NO_MENTIONS = {"parse": [], "replied_user": False}


def long_answer() -> str:
    code = "\n".join(f"    step_{i} = retry(call, attempts={i})  # attempt number {i}" for i in range(40))
    prose = "Retry sleeps longer after each failure [payments:payments/retry.py#L6-L12]. " * 12
    return "\n\n".join(
        [prose, f"```python\ndef plan():\n{code}\n```", prose, f"```python\n{code}\n```", prose]
    )


def test_a_5000_character_answer_is_split_into_messages_that_keep_code_blocks_whole(drig: DiscordRig) -> None:
    answer = long_answer()
    assert len(answer) > 5000
    drig.script_answer(answer)
    question = drig.mention("walk me through retry")
    drig.queued()
    drig.work()
    parts = [m["content"] for m in drig.fake.posted(question["id"])]
    assert len(parts) >= 3
    assert all(len(p) <= 2000 for p in parts)
    assert all(len(FENCE.findall(p)) % 2 == 0 for p in parts)  # every block opened is closed
    joined = "\n".join(parts)
    assert all(f"step_{i} = retry(call, attempts={i})" in joined for i in range(40))
    assert sum(p.count("```python") for p in parts) > 2  # a cut block reopens with its language


def test_mentions_in_model_output_are_sent_inert(drig: DiscordRig) -> None:
    drig.script_answer("@everyone and @here: <@&123456789012345678> owns it, ask <@123456789012345679>.")
    question = drig.mention("who owns retry?")
    drig.queued()
    drig.work()
    [answer] = drig.fake.posted(question["id"])
    assert "<@&123456789012345678>" in answer["content"] and "@everyone" in answer["content"]
    writes = drig.fake.find("POST", r"/messages$") + drig.fake.find("PATCH", r"/messages/\d+$")
    assert len(writes) >= 2  # the placeholder and the answer, and any live edit between them
    assert all(call.body["allowed_mentions"] == NO_MENTIONS for call in writes)


def test_a_429_is_waited_out_for_its_retry_after_then_the_message_is_sent_once(drig: DiscordRig) -> None:
    fake = drig.fake
    drig.script_answer("Retries back off [payments:payments/retry.py#L6-L12].")
    question = drig.mention("how does retry work?")
    drig.queued()
    fake.rate_limit(1, retry_after=0.6, method="POST", path=rf"^/channels/{question['id']}/messages$")
    drig.work()
    posts = fake.find("POST", rf"^/channels/{question['id']}/messages$")
    assert [c.status for c in posts] == [429, 200]
    assert len(fake.posted(question["id"])) == 1
    assert posts[1].at - posts[0].at >= 0.6  # discord.py slept for retry_after before retrying
    assert ("PUT", "✅") in drig.reactions(question["id"])


def test_a_retried_job_gets_its_earlier_messages_back_instead_of_posting_twice(drig: DiscordRig) -> None:
    fake = drig.fake
    asked, question = asked_question(drig)
    for attempt in range(3):  # each earlier worker died after posting its progress message
        if attempt == 2:  # what was recorded in Redis is lost: the thread and the nonce still hold
            drig.rig.redis.delete(MESSAGES_KEY_PREFIX + question.id)
        sink = DiscordSink(drig.settings, drig.rig.redis, question)
        sink.received()
        sink.progress("reading payments/retry.py")
        sink.close()
    assert len(fake.find("POST", "/threads$")) == 2  # the recorded thread was used; then found there
    assert [m["content"] for m in fake.posted(asked["id"])] == [
        "Looking into the code… reading payments/retry.py"
    ]
    nonces = [c.body["nonce"] for c in fake.find("POST", rf"^/channels/{asked['id']}/messages$")]
    assert len(nonces) == 2 and len(set(nonces)) == 1 and len(nonces[0]) <= 25


def test_a_model_failure_replaces_the_progress_with_an_apology_and_a_warning_sign(drig: DiscordRig) -> None:
    drig.rig.model.set_handler(lambda _request: error(500))  # the model endpoint is down
    question = drig.mention("how does retry work?")
    drig.queued()
    drig.work()
    [reply] = drig.fake.posted(question["id"])
    assert reply["content"].startswith("Sorry, I could not answer") and "Reference: `" in reply["content"]
    assert reply["allowed_mentions"] == NO_MENTIONS
    assert drig.reactions(question["id"])[-2:] == [("PUT", "⚠️"), ("DELETE", "👀")]


def test_without_permission_to_start_threads_the_answer_is_a_reply_in_the_channel(drig: DiscordRig) -> None:
    fake = drig.fake
    fake.forbid_threads = True
    drig.script_answer("Retries back off [payments:payments/retry.py#L6-L12].")
    question = drig.mention("how does retry work?")
    drig.queued()
    drig.work()
    [reply] = fake.posted(fake.channel_id)
    assert reply["content"].startswith("Retries back off")
    assert reply["message_reference"]["message_id"] == question["id"]
    assert [c.status for c in fake.find("POST", "/threads$")] == [403]  # asked once, never retried


def test_after_a_worker_dies_trying_again_and_the_apology_replace_its_progress_message(
    drig: DiscordRig,
) -> None:
    fake = drig.fake
    asked, question = asked_question(drig)
    died = DiscordSink(drig.settings, drig.rig.redis, question)  # the run whose worker was killed
    died.received()
    died.progress("reading payments/retry.py")
    died.close()
    callback = DiscordSink(drig.settings, drig.rig.redis, question)  # on_question_failed, a retry left
    callback.progress("the worker answering this stopped; trying again…")
    callback.close()
    assert [m["content"] for m in fake.posted(asked["id"])] == [
        "Looking into the code… the worker answering this stopped; trying again…"
    ]
    last = DiscordSink(drig.settings, drig.rig.redis, question)  # on_question_failed, no retry left
    last.failed("Sorry, the worker answering this stopped. Reference: `abc`")
    assert [m["content"] for m in fake.posted(asked["id"])] == [
        "Sorry, the worker answering this stopped. Reference: `abc`"
    ]
    assert drig.reactions(asked["id"])[-2:] == [("PUT", "⚠️"), ("DELETE", "👀")]


def test_a_rate_limit_longer_than_the_wait_allowed_leaves_the_check_mark_to_the_next_attempt(
    drig: DiscordRig,
) -> None:
    fake = drig.fake
    asked, question = asked_question(drig)
    answer = Answer(markdown="Retries back off.", sources=[], unverified=0, ref="abc", partial=False)
    sink = DiscordSink(drig.settings, drig.rig.redis, question)
    sink.received()
    fake.rate_limit(1, retry_after=3600, method="PATCH")  # beyond CODEBOT_DISCORD_MAX_RATELIMIT_WAIT_SECONDS
    sink.progress("reading payments/retry.py")  # cosmetic: logged, not raised
    fake.rate_limit(1, retry_after=3600, method="PUT")
    with pytest.raises(DeliveryFailed) as refused:
        sink.answer(answer)  # the text is in place, the ✅ is not: not delivered yet
    assert refused.value.retryable
    DiscordSink(drig.settings, drig.rig.redis, question).answer(answer)  # the outbox's next attempt
    assert [m["content"] for m in fake.posted(asked["id"])] == ["Retries back off."]
    assert ("PUT", "✅") in drig.reactions(asked["id"])
