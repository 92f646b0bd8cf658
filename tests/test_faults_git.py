"""A git remote force-pushed or unreachable while questions are asked: the last good snapshot serves.

(tests/test_mirrors.py covers the mirror itself: force-push followed, deleted branch, remote
moved or hung. Here: the same faults seen by an asker, through the adapter, RQ and the agent.)
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.e2e import Rig
from tests.support.model_server import Reply, text, tool_calls
from tests.support.slack_rig import SlackRig, build_slack_rig
from worker.repos.refresh import record_refresh

READ_RETRY = tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}))
CITE_LINE_3 = "It tries MAX_ATTEMPTS times [payments:payments/retry.py#L3]."


@pytest.fixture
def slack(tmp_path: Path) -> Iterator[SlackRig]:
    yield from build_slack_rig(tmp_path, admins="slack:UADMIN")


def force_push(source: Path, attempts: int) -> str:
    """Rewrite the tip of the remote's branch (commit --amend): the old commit is gone from it."""
    retry = source / "payments" / "retry.py"
    retry.write_text(retry.read_text().replace("MAX_ATTEMPTS = 5", f"MAX_ATTEMPTS = {attempts}"))
    subprocess.run(["git", "-C", str(source), "commit", "-qa", "--amend", "-m", "rewritten"], check=True)
    return subprocess.run(
        ["git", "-C", str(source), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_a_force_push_refreshed_mid_question_leaves_the_question_on_the_commit_it_started_with(
    rig: Rig, tmp_path: Path
) -> None:
    rewritten: list[str] = []

    def refresh_then_read(_body: dict[str, Any]) -> Reply:  # the model's first turn: an admin refresh lands
        rewritten.append(force_push(tmp_path / "payments-src", attempts=7))
        result = rig.runtime.mirrors.sync("payments")
        record_refresh(rig.redis, rig.runtime.mirrors, result, socket.gethostname())
        return READ_RETRY

    rig.model.set_handler(lambda body: refresh_then_read(body) if not rewritten else text(CITE_LINE_3))
    _, events = rig.ask("how many attempts?")
    kind, answer = rig.final(events)
    assert kind == "answer" and f"blob/{rig.sha}/payments/retry.py#L3" in answer["markdown"]
    assert "MAX_ATTEMPTS = 5" in rig.model.requests[1]["messages"][-1]["content"]  # what it read
    rig.model.set_handler(
        lambda body: text(CITE_LINE_3) if body["messages"][-1]["role"] == "tool" else READ_RETRY
    )
    _, events = rig.ask("and now?")
    kind, answer = rig.final(events)
    assert kind == "answer" and f"blob/{rewritten[0]}/payments/retry.py#L3" in answer["markdown"]
    assert rig.runtime.mirrors.gc("payments") == [rig.sha]  # no longer leased: collected


def test_an_unreachable_remote_fails_the_admin_refresh_and_questions_keep_their_snapshot(
    slack: SlackRig, tmp_path: Path
) -> None:
    shutil.move(tmp_path / "payments-src", tmp_path / "moved-away")
    slack.command("refresh payments", user="UADMIN")
    slack.settle()
    slack.model.enqueue(READ_RETRY, text(CITE_LINE_3))
    ts = slack.mention("how many attempts? repo:payments")
    slack.settle()
    slack.work()  # the admin queue first: the refresh fails; then the question
    (notice,) = slack.api.calls_to("chat.postEphemeral")
    assert "`payments`: failed: fetch failed:" in notice.body["text"]
    assert f"still serving `{slack.sha[:7]}`" in notice.body["text"]
    (reply,) = slack.api.thread_texts("C1", ts)
    assert f"blob/{slack.sha}/payments/retry.py#L3" in reply
    assert slack.api.reactions("C1", ts) == ["white_check_mark"]
