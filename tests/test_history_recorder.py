"""The recorder (worker/history/recorder.py): what a real question leaves in the database, and
exactly once across a recorder SIGKILLed mid-run, on SQLite and a real PostgreSQL (slow)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from redis import Redis
from sqlalchemy import func, select

from tests.support.e2e import Rig
from tests.support.history_db import HistoryDb, history_db, postgres_server
from tests.support.model_server import text, tool_calls
from tests.support.redis_servers import redis_server, wait_until
from worker.history import schema
from worker.history.events import append_event
from worker.history.export import rows_since
from worker.history.recorder import Recorder
from worker.history.store import count_rows

__all__ = ["history_db", "postgres_server"]  # fixtures

QUESTIONS = 6000


def record_all(redis: Redis, db: HistoryDb, consumer: str = "test") -> int:
    return Recorder(redis, db.engine, consumer, batch=50).run(threading.Event(), drain=True)


def start_recorder(redis_url: str, db: HistoryDb, data_dir: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, REDIS_URL=redis_url, CODEBOT_HISTORY_URL=db.url, CODEBOT_DATA_DIR=str(data_dir))
    command = [sys.executable, "-m", "codebot.cli", "history", "record", "--drain", "--batch", "10"]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_a_finished_question_reaches_the_database_with_its_trace_but_never_its_answer(
    rig: Rig, history_db: HistoryDb
) -> None:
    rig.model.enqueue(
        tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"})),
        text("It tries five times [payments:payments/retry.py#L3]."),
    )
    question, _ = rig.ask("how many attempts?")
    record_all(rig.redis, history_db)
    [row] = rows_since(history_db.engine, schema.questions, 0)
    assert (row["question_id"], row["status"], row["question"]) == (
        question.id,
        "answered",
        "how many attempts?",
    )
    [call] = rows_since(history_db.engine, schema.tool_calls, 0)
    assert call["line"].startswith("read_file") and call["event_id"] == row["event_id"]
    assert "five times" not in row["facts"]


def test_a_recorder_killed_mid_run_and_restarted_records_every_question_exactly_once(
    history_db: HistoryDb, tmp_path: Path
) -> None:
    with redis_server(tmp_path) as server:
        pipe = server.client().pipeline()
        for n in range(QUESTIONS):
            append_event(None, "question", {"id": f"job-{n}", "status": "answered"}, into=pipe)
        pipe.execute()
        first = start_recorder(server.url, history_db, tmp_path / "data")
        wait_until(lambda: count_rows(history_db.engine, schema.questions) >= 200, 120, "a first batches")
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert count_rows(history_db.engine, schema.questions) < QUESTIONS  # killed with work left
        second = start_recorder(server.url, history_db, tmp_path / "data")
        assert second.wait(timeout=300) == 0, second.stderr.read() if second.stderr else ""
    distinct = select(func.count(func.distinct(schema.questions.c.question_id)))
    with history_db.engine.connect() as connection:
        assert connection.execute(distinct).scalar_one() == QUESTIONS  # 0 missing
    assert count_rows(history_db.engine, schema.questions) == QUESTIONS  # 0 doubled


def test_a_batch_written_but_never_acknowledged_is_read_again_and_not_stored_twice(
    history_db: HistoryDb, tmp_path: Path
) -> None:
    with redis_server(tmp_path) as server:
        redis = server.client()
        for n in range(10):
            append_event(redis, "vote", {"question_id": f"job-{n}", "user": "U1", "vote": "up"})
        crashed = Recorder(redis, history_db.engine, "w1", batch=4)
        crashed.ensure_group()
        entries = crashed._next_entries(block=False)
        crashed.store(entries)  # committed, then the process dies before its XACK
        assert record_all(redis, history_db, consumer="w1") == 10  # its 4 pending, then the 6 others
    assert count_rows(history_db.engine, schema.votes) == 10
