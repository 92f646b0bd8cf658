"""Alembic's environment for the history database (worker/history/store.py runs it)."""
