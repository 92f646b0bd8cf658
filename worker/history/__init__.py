"""The history: every question, tool call, vote, reason, sync and model-endpoint event, kept in
a database for the operators (docs/history.md).

Workers never write the database: `events.append_event` adds one entry to a Redis stream in
the same place they write their Redis records, and one recorder (`codebot history record`,
`recorder.py`) moves the stream into the database (`store.py`, tables in `schema.py`, Alembic
migrations in `migrations/`), exactly once. `export.py` writes rows out as JSONL or CSV.

A layer just above worker/ops: the jobs, the agent and the repos append to it; it imports
only ops and config.
"""
