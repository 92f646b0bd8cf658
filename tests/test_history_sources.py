"""What reaches the history from where codebot already records things: votes and reasons
(redacted), syncs with the machine that ran them, model errors; and `codebot history export`
as an operator runs it."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from sqlalchemy import Table

from tests.support.e2e import Rig
from worker.agent.endpoint_memory import record_model_error
from worker.history import schema
from worker.history.export import rows_since
from worker.history.recorder import Recorder
from worker.history.store import history_url, open_engine, upgrade
from worker.jobs.feedback import record_answer, record_reason, record_vote
from worker.jobs.question import Question, ReplyTarget
from worker.jobs.question_log import record_question
from worker.jobs.sink import Answer
from worker.repos.refresh import record_refresh

SECRET = "AKIAQWERTYUIOPASDFGHJ"


def recorded(rig: Rig, table: Table) -> list[dict[str, Any]]:
    engine = open_engine(history_url(rig.settings))
    upgrade(engine)
    Recorder(rig.redis, engine, "test").run(threading.Event(), drain=True)
    return list(rows_since(engine, table, 0))


def test_a_vote_and_its_reason_reach_the_history_with_the_reason_redacted(rig: Rig) -> None:
    question = Question(id="q-slack-1", asker="U9", target=ReplyTarget(platform="slack", channel="C1"),
                        text="why?", repos=["payments"])  # fmt: skip
    record_answer(rig.redis, rig.settings, question, Answer(markdown="it retries"), {})
    assert record_vote(rig.redis, rig.settings, question.id, "slack", "U1", "down", "C1") == "new"
    assert record_reason(rig.redis, rig.settings, question.id, "U1", f"it printed {SECRET}")
    [vote] = recorded(rig, schema.votes)
    assert (vote["question_id"], vote["user"], vote["vote"], vote["platform"]) == (
        "q-slack-1",
        "U1",
        "down",
        "slack",
    )
    [reason] = recorded(rig, schema.reasons)
    assert reason["reason"].startswith("it printed") and SECRET not in reason["reason"]


def test_a_sync_reaches_the_history_with_the_machine_and_what_ran_it(rig: Rig) -> None:
    result = rig.runtime.mirrors.sync("payments")
    record_refresh(rig.redis, rig.runtime.mirrors, result, "host-a", "push")
    [sync] = recorded(rig, schema.syncs)
    assert (sync["repo"], sync["host"], sync["origin"], sync["ok"], sync["sha"]) == (
        "payments", "host-a", "push", True, rig.sha,
    )  # fmt: skip


def test_a_model_error_reaches_the_history_by_its_kind(rig: Rig) -> None:
    record_model_error(rig.redis, {"ref": "3f2a9c1d", "kind": "timeout", "status": 0, "detail": "no reply"})
    [event] = recorded(rig, schema.model_events)
    assert event["kind"] == "timeout" and '"3f2a9c1d"' in str(event["facts"])


def test_history_export_writes_the_questions_of_the_range_as_csv(rig: Rig, tmp_path: Path) -> None:
    for n in range(3):
        question = rig.question(f"=cmd|' /C calc'!A{n}")
        record_question(rig.redis, rig.settings, question, {"status": "answered", "ref": f"r{n}"})
    recorded(rig, schema.questions)
    env = dict(os.environ, CODEBOT_DATA_DIR=str(rig.settings.data_dir), REDIS_URL="redis://127.0.0.1:1/0")
    out = tmp_path / "q.csv"
    export = ["history", "export", "--since", "1d", "--format", "csv", "-o", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "codebot.cli", *export], env=env, capture_output=True, text=True, timeout=110
    )
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert sorted(row["ref"] for row in rows) == ["r0", "r1", "r2"]
    assert rows[0]["question"] == "'=cmd|' /C calc'!A0" and "3 questions rows written" in done.stderr
