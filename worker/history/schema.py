"""The history's tables (SQLAlchemy Core). Every row carries `at` (epoch seconds, indexed):
retention deletes by it, and every console query is a range of it.

Every table's key is the stream entry's own id (`event_id`, worker/history/events.py), plus the
line number for a question's tool calls: inserting an entry already written does nothing,
which is what makes the recorder exactly-once. A change here is a new Alembic revision in
migrations/versions/ (tests/test_history_store.py checks the two agree).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Float, Index, Integer, MetaData, String, Table, Text

metadata = MetaData()

ID = 32  # uuid4().hex

questions = Table(
    "questions",
    metadata,
    Column("event_id", String(ID), primary_key=True),
    Column("at", Float, nullable=False),
    Column("question_id", String(255), nullable=False),
    Column("ref", String(16), nullable=False),  # the reference the asker sees
    Column("asked_at", Float),
    Column("platform", String(32), nullable=False),
    Column("channel", String(255), nullable=False),
    Column("thread", String(255), nullable=False),
    Column("asker", String(255), nullable=False),
    Column("repos", Text, nullable=False),  # JSON list
    Column("follow_up", Boolean, nullable=False),
    Column("status", String(64), nullable=False),
    Column("reason", Text),
    Column("seconds", Float, nullable=False),
    Column("hops", Integer, nullable=False),
    Column("tool_calls", Integer, nullable=False),
    Column("prompt_tokens", Integer, nullable=False),
    Column("completion_tokens", Integer, nullable=False),
    Column("question", Text, nullable=False),  # redacted; "" unless feedback_keep_question_text
    Column("facts", Text, nullable=False),  # the whole record (JSON) but its trace
    Index("ix_questions_at", "at"),
    Index("ix_questions_ref", "ref"),
    Index("ix_questions_question_id", "question_id"),
)

tool_calls = Table(
    "tool_calls",
    metadata,
    Column("event_id", String(ID), primary_key=True),  # the question's entry
    Column("seq", Integer, primary_key=True),
    Column("at", Float, nullable=False),
    Column("line", Text, nullable=False),
    Index("ix_tool_calls_at", "at"),
)

votes = Table(
    "votes",
    metadata,
    Column("event_id", String(ID), primary_key=True),
    Column("at", Float, nullable=False),
    Column("question_id", String(255), nullable=False),
    Column("user", String(255), nullable=False),
    Column("vote", String(8), nullable=False),
    Column("platform", String(32), nullable=False),
    Index("ix_votes_at", "at"),
    Index("ix_votes_question_id", "question_id"),
)

reasons = Table(
    "reasons",
    metadata,
    Column("event_id", String(ID), primary_key=True),
    Column("at", Float, nullable=False),
    Column("question_id", String(255), nullable=False),
    Column("user", String(255), nullable=False),
    Column("reason", Text, nullable=False),  # redacted
    Index("ix_reasons_at", "at"),
)

syncs = Table(
    "syncs",
    metadata,
    Column("event_id", String(ID), primary_key=True),
    Column("at", Float, nullable=False),
    Column("repo", String(255), nullable=False),
    Column("host", String(255), nullable=False),
    Column("origin", String(32), nullable=False),  # cli, catch-up, refresh, push, scheduled
    Column("ok", Boolean, nullable=False),
    Column("sha", String(64), nullable=False),
    Column("changed", Boolean, nullable=False),
    Column("error", Text, nullable=False),
    Column("size_bytes", BigInteger),
    Column("error_kind", String(32), nullable=False, server_default=""),  # worker/repos/sync_errors.py
    Column("seconds", Float),  # None: recorded by a release that did not time syncs
    Index("ix_syncs_at", "at"),
    Index("ix_syncs_repo_at", "repo", "at"),  # the console's Repos page: each repo's syncs
)

model_events = Table(
    "model_events",
    metadata,
    Column("event_id", String(ID), primary_key=True),
    Column("at", Float, nullable=False),
    Column("kind", String(64), nullable=False),
    Column("facts", Text, nullable=False),  # JSON, already trimmed and redacted
    Index("ix_model_events_at", "at"),
)

TABLES = (questions, tool_calls, votes, reasons, syncs, model_events)
