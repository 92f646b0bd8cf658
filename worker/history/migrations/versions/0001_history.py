"""The history's first tables: questions, tool calls, votes, reasons, syncs, model events.

Revision ID: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "questions",
        sa.Column("event_id", sa.String(32), primary_key=True),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("question_id", sa.String(255), nullable=False),
        sa.Column("ref", sa.String(16), nullable=False),
        sa.Column("asked_at", sa.Float),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("channel", sa.String(255), nullable=False),
        sa.Column("thread", sa.String(255), nullable=False),
        sa.Column("asker", sa.String(255), nullable=False),
        sa.Column("repos", sa.Text, nullable=False),
        sa.Column("follow_up", sa.Boolean, nullable=False),
        sa.Column("status", sa.String(64), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("seconds", sa.Float, nullable=False),
        sa.Column("hops", sa.Integer, nullable=False),
        sa.Column("tool_calls", sa.Integer, nullable=False),
        sa.Column("prompt_tokens", sa.Integer, nullable=False),
        sa.Column("completion_tokens", sa.Integer, nullable=False),
        sa.Column("question", sa.Text, nullable=False),
        sa.Column("facts", sa.Text, nullable=False),
    )
    op.create_index("ix_questions_at", "questions", ["at"])
    op.create_index("ix_questions_ref", "questions", ["ref"])
    op.create_index("ix_questions_question_id", "questions", ["question_id"])
    op.create_table(
        "tool_calls",
        sa.Column("event_id", sa.String(32), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("line", sa.Text, nullable=False),
    )
    op.create_index("ix_tool_calls_at", "tool_calls", ["at"])
    op.create_table(
        "votes",
        sa.Column("event_id", sa.String(32), primary_key=True),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("question_id", sa.String(255), nullable=False),
        sa.Column("user", sa.String(255), nullable=False),
        sa.Column("vote", sa.String(8), nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
    )
    op.create_index("ix_votes_at", "votes", ["at"])
    op.create_index("ix_votes_question_id", "votes", ["question_id"])
    op.create_table(
        "reasons",
        sa.Column("event_id", sa.String(32), primary_key=True),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("question_id", sa.String(255), nullable=False),
        sa.Column("user", sa.String(255), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
    )
    op.create_index("ix_reasons_at", "reasons", ["at"])
    op.create_table(
        "syncs",
        sa.Column("event_id", sa.String(32), primary_key=True),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("origin", sa.String(32), nullable=False),
        sa.Column("ok", sa.Boolean, nullable=False),
        sa.Column("sha", sa.String(64), nullable=False),
        sa.Column("changed", sa.Boolean, nullable=False),
        sa.Column("error", sa.Text, nullable=False),
        sa.Column("size_bytes", sa.BigInteger),
    )
    op.create_index("ix_syncs_at", "syncs", ["at"])
    op.create_table(
        "model_events",
        sa.Column("event_id", sa.String(32), primary_key=True),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("facts", sa.Text, nullable=False),
    )
    op.create_index("ix_model_events_at", "model_events", ["at"])


def downgrade() -> None:
    for table in ("model_events", "syncs", "reasons", "votes", "tool_calls", "questions"):
        op.drop_table(table)
