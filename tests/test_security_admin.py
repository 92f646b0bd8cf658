"""Admin commands from people who are not admins, on Slack and on Discord: a private refusal,
no job enqueued, nothing of the status shown, and admin rights never carried across platforms
or spellings of a user id.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rq import Queue

from bot import texts
from tests.support.discord_rig import DiscordRig, discord_rig
from tests.support.fake_discord import FakeDiscord
from tests.support.hostile_slack import ADMIN, HostileSlackRig, build_hostile_slack_rig
from tests.support.slack_rig import SECRET_CHANNEL
from worker.jobs.queue import ADMIN_QUEUE

EPHEMERAL = 64
STATUS_WORDS = ("Workers alive", "Queue:", "Last refresh per repo", "Refreshing")  # what only admins see


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileSlackRig]:
    yield from build_hostile_slack_rig(tmp_path_factory.mktemp("admin"))


def admin_jobs(redis: Any) -> int:
    return Queue(ADMIN_QUEUE, connection=redis).count


@pytest.mark.parametrize(
    "user",
    ["UNOBODY", ADMIN.lower(), f"{ADMIN} ", f" {ADMIN}", "42", "discord:42", f"{ADMIN},slack:{ADMIN}", ""],
)
@pytest.mark.parametrize(
    "command", ["refresh all", "REFRESH app", "refresh internal", "status", "Status now"]
)
@pytest.mark.parametrize("channel", ["C1", "D1", SECRET_CHANNEL])
def test_slack_admin_commands_from_a_non_admin_are_refused_privately_and_enqueue_nothing(
    rig: HostileSlackRig, user: str, command: str, channel: str
) -> None:
    before = len(rig.api.calls)
    status, body = rig.command(command, user=user, channel=channel)
    rig.settle()
    answer = json.loads(body)
    assert status == 200 and answer["response_type"] == "ephemeral"
    assert answer["text"] == texts.NOT_ADMIN.format(command=command.split()[0].lower())
    assert admin_jobs(rig.redis) == 0
    later = [call.method for call in rig.api.calls[before:] if call.method != "auth.test"]
    assert later == []  # no message, no response_url follow-up: only the private ack


def test_the_same_commands_work_for_the_admin_which_proves_the_refusals_are_about_who_asks(
    rig: HostileSlackRig,
) -> None:
    rig.command("status", user=ADMIN)
    rig.settle()
    assert "codebot status" in rig.api.calls_to("response_url")[-1].body["text"]
    rig.command("refresh app", user=ADMIN)
    rig.settle()
    assert admin_jobs(rig.redis) == 1
    Queue(ADMIN_QUEUE, connection=rig.redis).empty()


@pytest.fixture
def drig(tmp_path: Path) -> Iterator[DiscordRig]:
    fake = FakeDiscord().start()
    try:
        # The Discord user "alice" shares her id with a Slack admin: that makes her nothing here.
        admins = f"slack:{fake.human['id']},discord:{fake.admin['id']}"
        with discord_rig(tmp_path, fake=fake, admins=admins) as rig:
            yield rig
    finally:
        fake.close()


def callback(fake: FakeDiscord, interaction: dict[str, Any]) -> dict[str, Any]:
    path = f"^/interactions/{interaction['id']}/{interaction['token']}/callback$"
    body: dict[str, Any] = fake.wait_for(lambda: fake.find("POST", path))[0].body
    return body


@pytest.mark.parametrize(
    ("sub", "options"),
    [
        ("status", {}),
        ("refresh", {"name": "all"}),
        ("refresh", {"name": "payments"}),
        ("refresh", {"name": "x"}),
    ],
)
def test_discord_admin_commands_from_a_non_admin_are_refused_privately_and_enqueue_nothing(
    drig: DiscordRig, sub: str, options: dict[str, str]
) -> None:
    fake = drig.fake
    before = len(fake.calls)
    for channel in (None, fake.open_dm()):
        body = callback(fake, fake.interaction(sub, options, channel=channel))
        assert body["type"] == 4 and body["data"]["flags"] == EPHEMERAL
        assert body["data"]["content"] == texts.NOT_ADMIN.format(command=sub)
    assert admin_jobs(drig.rig.redis) == 0
    sent = json.dumps([call.body for call in fake.calls[before:]], ensure_ascii=False)
    assert not any(word in sent for word in STATUS_WORDS)
    assert fake.find("POST", "/messages$") == [] and fake.find("PATCH", "@original$") == []


def test_discord_the_admin_is_answered_so_the_refusal_is_about_who_asks(drig: DiscordRig) -> None:
    fake = drig.fake
    asked = fake.interaction("status", user=fake.admin)
    assert callback(fake, asked)["type"] == 5  # deferred: the status is on its way
    fake.wait_for(lambda: any("codebot status" in str(c.body) for c in fake.find("PATCH", "@original$")))
