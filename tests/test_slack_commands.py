"""`/codebot` over real signed HTTP: help, repos, and the admin-only refresh and status."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
from rq import Queue, Worker
from rq.worker import WorkerStatus

from tests.support.fixture_repos import make_repo
from tests.support.slack_rig import SECRET_CHANNEL, SlackRig
from worker.jobs.queue import QUESTIONS_QUEUE

pytestmark = pytest.mark.rig("slack", admins="slack:UADMIN,discord:42")


def responses(rig: SlackRig) -> list[dict[str, str]]:
    rig.settle()
    return [call.body for call in rig.api.calls_to("response_url")]


def test_help_is_answered_privately_in_the_ack(rig: SlackRig) -> None:
    status, body = rig.command("help")
    answer = json.loads(body)
    assert status == 200
    assert answer["response_type"] == "ephemeral"
    assert "/codebot refresh` (a repo name or `all`)" in answer["text"]


def test_repos_lists_only_the_repos_allowed_in_that_channel_with_commit_and_age(rig: SlackRig) -> None:
    rig.command("repos")
    (listing,) = responses(rig)
    assert listing["response_type"] == "ephemeral"
    assert f"`payments` — the payments service — commit `{rig.sha[:7]}`" in listing["text"]
    assert "`web-frontend` — the website — not synced yet" in listing["text"]
    assert "internal" not in listing["text"]
    rig.command("repos", channel=SECRET_CHANNEL)
    assert "`internal` — internal plans" in responses(rig)[-1]["text"]


def test_a_non_admin_is_refused_refresh_and_status_privately(rig: SlackRig) -> None:
    for sub in ("refresh all", "status"):
        status, body = rig.command(sub, user="UNOBODY")
        answer = json.loads(body)
        assert status == 200 and answer["response_type"] == "ephemeral"
        assert answer["text"].startswith("Sorry, only codebot admins can run")
    rig.settle()
    assert rig.api.calls_to("chat.postMessage") == []
    assert rig.redis.llen("rq:queue:codebot-admin") == 0


def test_an_admin_refresh_runs_on_a_worker_and_reports_the_new_commit(rig: SlackRig, tmp_path: Path) -> None:
    new_sha = make_repo(tmp_path / "payments-src", {"CHANGELOG.md": "v2\n"})
    rig.command("refresh payments", user="UADMIN")
    (queued,) = responses(rig)
    assert queued["text"] == "Refreshing `payments`; I'll tell you when it's done."
    rig.work()
    (notice,) = rig.api.calls_to("chat.postEphemeral")
    assert notice.body["user"] == "UADMIN" and notice.body["channel"] == "C1"
    assert f"• `payments`: at commit `{new_sha[:7]}` (new commit)" in notice.body["text"]
    assert rig.runtime.mirrors.current("payments").sha == new_sha  # type: ignore[union-attr]


def test_the_refresh_report_comes_as_a_dm_when_the_channel_cannot_take_an_ephemeral(rig: SlackRig) -> None:
    rig.api.fail("chat.postEphemeral", "not_in_channel")
    rig.command("refresh payments", user="UADMIN", channel="CNOTMEMBER")
    rig.settle()
    rig.work()
    (dm,) = rig.api.calls_to("chat.postMessage")
    assert dm.body["channel"] == "UADMIN"
    assert f"• `payments`: at commit `{rig.sha[:7]}` (already up to date)" in dm.body["text"]


def test_a_refresh_whose_report_cannot_be_delivered_is_not_reported_as_unfinished(rig: SlackRig) -> None:
    rig.api.fail("chat.postEphemeral", "not_in_channel")
    rig.api.fail("chat.postMessage", "channel_not_found")  # the DM fallback fails too
    rig.command("refresh payments", user="UADMIN", channel="CNOTMEMBER")
    rig.settle()
    rig.work()
    notices = rig.api.calls_to("chat.postEphemeral") + rig.api.calls_to("chat.postMessage")
    assert len(notices) == 2  # tried once each, and nothing more
    assert not any("did not finish" in call.body["text"] for call in notices)
    assert rig.redis.hget("codebot:repo:payments", "sha") == rig.sha.encode()


def test_refreshing_an_unknown_repo_names_the_nearest_ones(rig: SlackRig) -> None:
    rig.command("refresh paymnt", user="UADMIN")
    (answer,) = responses(rig)
    assert answer["text"].startswith("There is no repo `paymnt`")
    assert rig.redis.llen("rq:queue:codebot-admin") == 0


def test_status_shows_queue_workers_failures_and_last_refresh(rig: SlackRig) -> None:
    rig.command("refresh all", user="UADMIN")
    rig.settle()
    rig.work()
    rig.model.set_handler(lambda body: None)  # the model fails: one failed question
    rig.mention("a question that fails?")
    rig.settle()
    rig.work()
    rig.mention("a question waiting in the queue?")
    rig.settle()
    alive = Worker([Queue(QUESTIONS_QUEUE, connection=rig.redis)], connection=rig.redis, name="w-alive")
    alive.register_birth()
    alive.set_state(WorkerStatus.IDLE)
    rig.command("status", user="UADMIN")
    text = responses(rig)[-1]["text"]
    alive.register_death()
    assert text.startswith("*codebot status*")
    assert "Queue: 1 question(s) waiting, 0 admin job(s)" in text
    assert "Workers alive: 1" in text and f"`w-alive` on `{socket.gethostname()}`: idle" in text
    assert "Failed questions in the last hour: 1" in text
    # any age: the rig's refresh is seconds old on an idle machine, a minute or more on a busy one
    age = r"\d+ (?:s|min)"
    line = rf"`payments`: commit `{rig.sha[:7]}`, refreshed {age} ago on `{re.escape(socket.gethostname())}`"
    assert re.search(line, text)
