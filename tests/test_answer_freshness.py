"""End to end: every answer from code names the commit it read and how old it is, and says when a
push's refresh to a newer commit is under way; `/codebot repos` says the same. A real bare
repo, real commits, real Redis, a real worker; the Slack and Discord fakes speak their APIs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rq.registry import StartedJobRegistry

from tests.support.discord_rig import DiscordRig
from tests.support.e2e import Rig
from tests.support.fixture_repos import make_repo
from tests.support.model_server import text, tool_calls
from tests.support.slack_rig import SlackRig, wait_until
from tests.support.worker_procs import SETTLE_SECONDS, start_worker, stop_worker
from worker.jobs.push_refresh import PENDING_KEY_PREFIX, enqueue_push_refresh
from worker.jobs.queue import ADMIN_QUEUE
from worker.repos.locks import exclusive_lock
from worker.repos.mirror_state import RepoPaths

READ_RETRY = ("read_file", {"repo": "payments", "path": "payments/retry.py", "start_line": 1, "end_line": 13})
AGE = r"\((committed and fetched|committed \d+ (s|min) ago, fetched) \d+ (s|min) ago\)"


def read_line(sha: str) -> re.Pattern[str]:
    return re.compile(rf"_Read `payments` at `{sha[:7]}` {AGE}\._")


def test_codebot_ask_prints_the_commit_it_read_and_how_old_it_is(rig: Rig) -> None:
    rig.model.enqueue(tool_calls(READ_RETRY), text("It retries 5 times [payments:payments/retry.py#L3]."))
    _question, events = rig.ask("how many times does retry try?")
    kind, fields = rig.final(events)
    assert kind == "answer"
    markdown = str(fields["markdown"])
    assert markdown.index("**Sources**") < markdown.index("_Read `payments`")  # it closes the answer
    assert read_line(rig.sha).search(markdown.splitlines()[-1])


def test_a_question_asked_while_a_push_refresh_waits_says_a_newer_commit_is_coming(
    rig: Rig, tmp_path: Path
) -> None:
    pushed = make_repo(tmp_path / "payments-src", {"CHANGELOG.md": "v2\n"})  # a push not fetched yet
    assert enqueue_push_refresh(rig.redis, "payments", pushed, "github")  # waits: no admin worker here
    rig.model.enqueue(tool_calls(READ_RETRY), text("Five times."))
    _question, events = rig.ask("how many times does retry try?")
    lines = str(rig.final(events)[1]["markdown"]).splitlines()
    assert read_line(rig.sha).search(lines[-2])  # what it read: the commit before the push
    assert lines[-1] == (
        f"_A refresh to a newer commit is under way for `payments` (to `{pushed[:7]}`): "
        "asking again shortly reads it._"
    )


@pytest.mark.slow
def test_a_question_asked_while_a_push_refresh_runs_says_a_newer_commit_is_coming(
    rig: Rig, tmp_path: Path
) -> None:
    pushed = make_repo(tmp_path / "payments-src", {"CHANGELOG.md": "v2\n"})
    paths = RepoPaths(rig.runtime.mirrors.root / "payments")
    worker = None
    try:
        with exclusive_lock(paths.refresh_lock, 5.0):  # another sync of the repo: the push's refresh waits
            assert enqueue_push_refresh(rig.redis, "payments", pushed, "github")
            worker = start_worker(rig.settings, "--concurrency", "1")  # its one seat: the refresh
            started = StartedJobRegistry(ADMIN_QUEUE, connection=rig.redis)
            # running, no longer waiting: the job gave its pending claim up as it started
            wait_until(
                lambda: started.count == 1 and not rig.redis.exists(PENDING_KEY_PREFIX + "payments"),
                SETTLE_SECONDS,
            )
            rig.model.enqueue(tool_calls(READ_RETRY), text("Five times."))
            _question, events = rig.ask("how many times does retry try?")
    finally:
        if worker is not None:
            stop_worker(worker)
    lines = str(rig.final(events)[1]["markdown"]).splitlines()
    assert read_line(rig.sha).search(lines[-2])
    assert f"under way for `payments` (to `{pushed[:7]}`)" in lines[-1]


def test_a_refresh_for_an_earlier_push_than_the_commit_read_is_not_said(rig: Rig, tmp_path: Path) -> None:
    later = make_repo(tmp_path / "payments-src", {"CHANGELOG.md": "v2\n"})
    assert rig.runtime.mirrors.sync("payments").ok  # already at the later commit
    assert enqueue_push_refresh(rig.redis, "payments", rig.sha, "github")  # for the earlier push
    rig.model.enqueue(tool_calls(READ_RETRY), text("Five times."))
    _question, events = rig.ask("how many times does retry try?")
    lines = str(rig.final(events)[1]["markdown"]).splitlines()
    assert read_line(later).search(lines[-1])
    assert not any("refresh" in line for line in lines)


@pytest.mark.rig("slack")
def test_a_slack_answer_ends_with_the_commit_it_read_and_its_age(rig: SlackRig) -> None:
    rig.model.enqueue(tool_calls(READ_RETRY), text("It retries 5 times [payments:payments/retry.py#L3]."))
    ts = rig.mention("how many times does retry try?")
    rig.settle()
    rig.work()
    (reply,) = rig.api.thread_texts("C1", ts)
    assert read_line(rig.sha).search(reply.splitlines()[-1])


@pytest.mark.rig("slack")
def test_codebot_repos_says_each_commits_age_and_a_push_refresh_under_way(
    rig: SlackRig, tmp_path: Path
) -> None:
    pushed = make_repo(tmp_path / "payments-src", {"CHANGELOG.md": "v2\n"})
    assert enqueue_push_refresh(rig.redis, "payments", pushed, "github")
    rig.command("repos")
    rig.settle()
    listing = rig.api.calls_to("response_url")[-1].body["text"]
    (payments,) = [line for line in listing.splitlines() if "`payments`" in line]
    assert re.search(rf"commit `{rig.sha[:7]}` {AGE}; a refresh to `{pushed[:7]}` is under way$", payments)


def test_a_discord_answer_ends_with_the_commit_it_read_and_its_age(drig: DiscordRig) -> None:
    drig.script_answer("Five times.")
    question = drig.mention("how many times does retry try?")
    drig.queued()
    drig.work()
    (reply,) = [m["content"] for m in drig.fake.posted(question["id"])]
    assert reply.startswith("Five times.")
    assert read_line(drig.rig.sha).search(reply.splitlines()[-1])
