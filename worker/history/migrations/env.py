"""Alembic's environment: run by worker/history/store.py's `upgrade`, on the connection it
passes in `config.attributes["connection"]` (never a URL from alembic.ini: there is none)."""

from __future__ import annotations

from alembic import context

from worker.history.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
