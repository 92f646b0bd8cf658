"""Syncs: how long each took and the kind of its failure; syncs by repo, newest first.

Revision ID: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("syncs") as batch:  # batch: SQLite's ALTER TABLE is limited
        batch.add_column(sa.Column("error_kind", sa.String(32), nullable=False, server_default=""))
        batch.add_column(sa.Column("seconds", sa.Float))
    op.create_index("ix_syncs_repo_at", "syncs", ["repo", "at"])


def downgrade() -> None:
    op.drop_index("ix_syncs_repo_at", "syncs")
    with op.batch_alter_table("syncs") as batch:
        batch.drop_column("seconds")
        batch.drop_column("error_kind")
