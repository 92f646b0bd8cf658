"""`/codebot …` application commands: synced at start, answered within Discord's 3 s, admin checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rq import Queue, SimpleWorker

from bot import texts
from tests.support.discord_rig import DiscordRig, discord_rig
from tests.support.fake_discord import FakeDiscord
from worker.jobs import texts as core_texts
from worker.jobs.queue import ADMIN_QUEUE

EPHEMERAL = 64
SUBCOMMANDS = ["ask", "repos", "help", "refresh", "status"]


def callback(fake: FakeDiscord, interaction: dict[str, Any]) -> dict[str, Any]:
    """The interaction's initial response, once the adapter has sent it."""
    path = f"^/interactions/{interaction['id']}/{interaction['token']}/callback$"
    return fake.wait_for(lambda: fake.find("POST", path))[0].body


def original(fake: FakeDiscord, interaction: dict[str, Any]) -> dict[str, Any]:
    """The deferred response as last edited."""
    path = f"^/webhooks/{fake.bot_id}/{interaction['token']}/messages/@original$"
    return fake.wait_for(lambda: fake.find("PATCH", path))[-1].body


def test_the_commands_are_synced_globally_at_start(drig: DiscordRig) -> None:
    fake = drig.fake
    assert fake.command_route == f"/applications/{fake.bot_id}/commands"
    [group] = fake.commands
    assert group["name"] == "codebot"
    assert [option["name"] for option in group["options"]] == SUBCOMMANDS


def test_the_commands_go_to_the_development_guild_when_one_is_set(tmp_path: Path) -> None:
    fake = FakeDiscord().start()
    try:
        with discord_rig(tmp_path, fake=fake, discord_command_guild=int(fake.guild_id)) as rig:
            assert rig.fake.command_route == f"/applications/{fake.bot_id}/guilds/{fake.guild_id}/commands"
            help_ = callback(fake, fake.interaction("help"))
            assert help_["type"] == 4 and help_["data"]["flags"] == EPHEMERAL
    finally:
        fake.close()


def test_help_is_answered_privately_at_once(drig: DiscordRig) -> None:
    body = callback(drig.fake, drig.fake.interaction("help"))
    assert body["type"] == 4  # a message now, not a deferral
    assert body["data"]["content"] == texts.HELP
    assert body["data"]["flags"] == EPHEMERAL
    assert body["data"]["allowed_mentions"]["parse"] == []


def test_a_non_admin_refresh_is_refused_privately_and_queues_nothing(drig: DiscordRig) -> None:
    body = callback(drig.fake, drig.fake.interaction("refresh", {"name": "all"}))
    assert body["type"] == 4
    assert body["data"]["content"] == texts.NOT_ADMIN.format(command="refresh")
    assert body["data"]["flags"] == EPHEMERAL
    assert Queue(ADMIN_QUEUE, connection=drig.rig.redis).count == 0


def test_an_admin_refresh_is_deferred_queued_and_reported_privately(drig: DiscordRig) -> None:
    fake = drig.fake
    asked = fake.interaction("refresh", {"name": "payments"}, user=fake.admin)
    deferred = callback(fake, asked)
    assert deferred["type"] == 5 and deferred["data"]["flags"] == EPHEMERAL
    assert original(fake, asked)["content"] == texts.REFRESH_QUEUED.format(names="`payments`")
    SimpleWorker([Queue(ADMIN_QUEUE, connection=drig.rig.redis)], connection=drig.rig.redis).work(burst=True)
    [report] = fake.find("POST", f"^/webhooks/{fake.bot_id}/{asked['token']}$")
    assert report.body["flags"] == EPHEMERAL
    assert "`payments`: at commit" in report.body["content"]


def test_an_unknown_repo_to_refresh_gets_the_list_nearest_name_first(drig: DiscordRig) -> None:
    fake = drig.fake
    body = callback(fake, fake.interaction("refresh", {"name": "paymnts"}, user=fake.admin))
    assert body["data"]["flags"] == EPHEMERAL
    assert body["data"]["content"].startswith("There is no repo `paymnts`")
    assert "`payments`" in body["data"]["content"]


def test_ask_is_answered_in_a_thread_started_from_the_commands_message(drig: DiscordRig) -> None:
    fake = drig.fake
    drig.script_answer("Retries back off exponentially [payments:payments/retry.py#L6-L12].")
    asked = fake.interaction("ask", {"question": "how does retry work?"})
    assert callback(fake, asked)["type"] == 5  # deferred, public
    assert original(fake, asked)["content"] == f"**<@{fake.human['id']}> asked:** how does retry work?"
    drig.queued()
    drig.work()
    shown = fake.interaction_messages[asked["token"]]
    assert fake.channels[shown]["parent_id"] == fake.channel_id  # the thread started from it
    [answer] = fake.posted(shown)
    assert answer["content"].startswith("Retries back off exponentially")
    assert drig.reactions(shown)[-2:] == [("PUT", "✅"), ("DELETE", "👀")]


def test_status_for_an_admin_reports_the_queue_privately(drig: DiscordRig) -> None:
    fake = drig.fake
    asked = fake.interaction("status", user=fake.admin)
    assert callback(fake, asked)["data"]["flags"] == EPHEMERAL
    report = original(fake, asked)["content"]
    assert report.startswith(core_texts.STATUS_TITLE)
    assert "`payments`" in report
