"""Scoping and limits on Discord: `repo:NAME`, channel allow-lists (threads follow their parent
channel, a guild id grants nothing), the per-user rate limit and the queue limit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from bot import texts
from tests.support.discord_payloads import user
from tests.support.discord_rig import DiscordRig, discord_rig
from tests.support.fake_discord import FakeDiscord
from worker.jobs.question import Question
from worker.jobs.queue import questions_queue
from worker.ops.accounting import BUDGET_SPENT_MESSAGE


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    fake = FakeDiscord().start()
    yield fake
    fake.close()


def restricted_rig(
    tmp: Path, fake: FakeDiscord, channels: list[str], **overrides: Any
) -> AbstractContextManager[DiscordRig]:
    """`payments` limited to `channels`; `docs` open everywhere."""
    repos = tmp / "restricted.toml"
    repos.write_text(
        f'[[repo]]\nname = "payments"\nurl = "{tmp / "payments-src"}"\nchannels = {channels!r}\n'
        f'[[repo]]\nname = "docs"\nurl = "{tmp / "payments-src"}"\n'.replace("'", '"'),
        encoding="utf-8",
    )
    return discord_rig(tmp, fake=fake, repos_file=repos, **overrides)


def reply_to(drig: DiscordRig, message: dict[str, Any]) -> str:
    def find() -> list[dict[str, Any]]:
        return [
            m
            for m in drig.fake.posted(message["channel_id"])
            if str((m.get("message_reference") or {}).get("message_id")) == message["id"]
        ]

    return str(drig.fake.wait_for(find)[0]["content"])


def test_an_unknown_repo_gets_the_list_nearest_name_first(tmp_path: Path) -> None:
    with discord_rig(tmp_path) as drig:
        asked = drig.mention("how does retry work in repo:paymnts?")
        assert reply_to(drig, asked) == "There is no repo `paymnts`. Repos you can ask about here: `payments`"


def test_a_repo_outside_the_channels_allow_list_gets_the_answer_of_a_repo_that_does_not_exist(
    tmp_path: Path, fake: FakeDiscord
) -> None:
    with restricted_rig(tmp_path, fake, [f"discord:{fake.guild_id}"]) as drig:  # a guild id grants nothing
        asked = drig.mention("repo:payments how does retry work?")
        assert reply_to(drig, asked) == "There is no repo `payments`. Repos you can ask about here: `docs`"


def test_a_thread_follows_its_parent_channels_allow_list(tmp_path: Path, fake: FakeDiscord) -> None:
    with restricted_rig(tmp_path, fake, [f"discord:{fake.channel_id}"]) as drig:
        drig.script_answer("Retries back off [payments:payments/retry.py#L6-L12].")
        first = drig.mention("repo:payments how does retry work?")
        drig.queued()
        drig.work()
        assert drig.rig.model.requests  # allowed in the channel, so answered
        follow = drig.fake.message_create("repo:payments and the attempts?", channel=first["id"])
        drig.acked(follow)  # allowed in the thread too: queued, no refusal
        dm = drig.fake.message_create("repo:payments how?", channel=drig.fake.open_dm())
        assert reply_to(drig, dm) == "There is no repo `payments`. Repos you can ask about here: `docs`"


def test_a_user_asking_too_fast_is_told_how_long_to_wait(tmp_path: Path) -> None:
    with discord_rig(tmp_path, rate_limit_questions=1) as drig:
        drig.acked(drig.mention("how does retry work?"))
        second = drig.mention("and the attempts?")
        assert reply_to(drig, second) in {texts.RATE_LIMITED.format(seconds=s) for s in range(55, 61)}


def test_a_full_queue_turns_new_questions_away(tmp_path: Path) -> None:
    with discord_rig(tmp_path, queue_max_depth=1) as drig:
        drig.acked(drig.mention("how does retry work?"))
        second = drig.mention("and the attempts?", author=user("bob"))
        assert reply_to(drig, second) == texts.QUEUE_FULL.format(depth=1)


def test_a_follow_up_naming_no_repo_keeps_the_repo_its_thread_asked_about(
    tmp_path: Path, fake: FakeDiscord
) -> None:
    with restricted_rig(tmp_path, fake, [f"discord:{fake.channel_id}"]) as drig:
        drig.script_answer("It is README.md [docs:README.md#L1].")
        first = drig.mention("repo:docs where is the readme?")
        drig.queued()
        drig.work()  # answered: its thread exists
        follow = drig.fake.message_create("and what does it say?", channel=first["id"])
        drig.acked(follow)
        named = drig.fake.message_create("repo:payments and retry?", channel=first["id"])
        drig.acked(named)
        then = drig.fake.message_create("how many attempts?", channel=first["id"])
        drig.acked(then)
        jobs = questions_queue(drig.rig.redis).jobs
        asked = [Question.model_validate_json(job.args[0]) for job in jobs]
        assert [q.repos for q in asked] == [["docs"], ["payments"], ["payments"]]
        assert [q.target.thread for q in asked] == [first["id"]] * 3


def test_when_the_daily_budget_is_spent_questions_are_turned_away(tmp_path: Path) -> None:
    with discord_rig(tmp_path, daily_token_budget=1) as drig:
        drig.script_answer("Retries back off [payments:payments/retry.py#L6-L12].")
        drig.acked(drig.mention("how does retry work?"))
        drig.work()  # the model's tokens are counted against today's budget
        late = drig.mention("and the attempts?")
        assert reply_to(drig, late) == BUDGET_SPENT_MESSAGE
