"""Mentions, threads and replies on Discord: the real discord.py adapter and worker against a fake Discord."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.discord_rig import DiscordRig, discord_rig


@pytest.fixture
def drig(tmp_path: Path) -> Iterator[DiscordRig]:
    with discord_rig(tmp_path) as rig:
        yield rig


def test_a_mention_gets_eyes_a_thread_the_answer_and_a_check_mark(drig: DiscordRig) -> None:
    fake = drig.fake
    drig.script_answer("Retries back off exponentially [payments:payments/retry.py#L6-L12].")
    question = drig.mention("how does retry work?")
    drig.queued()
    drig.work()
    thread = fake.channels[question["id"]]
    assert thread["type"] == 11 and thread["parent_id"] == fake.channel_id
    assert thread["name"] == "how does retry work?"
    [answer] = fake.posted(question["id"])
    assert "Retries back off exponentially" in answer["content"]
    assert answer["embeds"][0]["title"] == "Sources"
    assert drig.reactions(question["id"])[-2:] == [("PUT", "✅"), ("DELETE", "👀")]
    assert ("PUT", "👀") in drig.reactions(question["id"])
