"""The history database: opened from a URL, migrated with Alembic, written in batches, pruned.

`CODEBOT_HISTORY_URL` unset: SQLite at `<CODEBOT_DATA_DIR>/history.sqlite3`, nothing to install
(WAL mode, so the console reads while the recorder writes). `postgresql://…`: PostgreSQL
through psycopg 3, for several machines. Writes are INSERT … ON CONFLICT DO NOTHING on the
event's own key, so a batch written twice is stored once.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Table, create_engine, delete, event, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.pool import ConnectionPoolEntry

from config.settings import Settings
from worker.history import schema
from worker.history.rows import Event, rows_by_table
from worker.ops.sqlite_wal import use_wal

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
SQLITE_BUSY_MS = 30_000  # the recorder's commit and the console's read take turns


def history_url(settings: Settings) -> str:
    """The database's URL: CODEBOT_HISTORY_URL, else SQLite in the data directory."""
    configured = settings.history_url.get_secret_value() if settings.history_url else ""
    if not configured:
        return f"sqlite:///{settings.data_dir.resolve() / 'history.sqlite3'}"
    url = make_url(configured)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")  # psycopg 3, not SQLAlchemy's psycopg2 default
    return url.render_as_string(hide_password=False)


def open_engine(url: str) -> Engine:
    """An engine for `url`; SQLite's file (and its directory) is created on first use."""
    engine = create_engine(url, pool_pre_ping=True)
    if engine.dialect.name == "sqlite":
        database = engine.url.database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    use_wal(connection)
    cursor = connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable at each checkpoint, fast
    cursor.close()


def upgrade(engine: Engine) -> None:
    """Bring the schema to the newest revision (Alembic; a no-op when it is there already).
    Alembic is imported here, not at the top: the console imports this module, and Alembic
    logs its plugins at INFO as it is imported."""
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its INFO lines are per start, not news
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def write_events(engine: Engine, events: list[Event]) -> int:
    """Store a batch in one transaction; an event already stored is left as it is. Returns the
    number of events in the batch that became rows."""
    with engine.begin() as connection:
        for table, rows in rows_by_table(events).items():
            if rows:
                connection.execute(_insert_ignoring_duplicates(connection, table), rows)
    return len(events)


def _insert_ignoring_duplicates(connection: Connection, table: Table) -> Any:
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    return dialect.insert(table).on_conflict_do_nothing()


def prune(engine: Engine, retention_days: float, now: float | None = None) -> dict[str, int]:
    """Delete every table's rows older than the retention: table name -> rows deleted."""
    before = (time.time() if now is None else now) - retention_days * 86400
    deleted: dict[str, int] = {}
    with engine.begin() as connection:
        for table in schema.TABLES:
            deleted[table.name] = connection.execute(delete(table).where(table.c.at < before)).rowcount
    return deleted


def count_rows(engine: Engine, table: Table, since: float = 0.0, until: float | None = None) -> int:
    """Rows of `table` whose time is in [since, until)."""
    query = select(func.count()).select_from(table).where(table.c.at >= since)
    if until is not None:
        query = query.where(table.c.at < until)
    with engine.connect() as connection:
        return int(connection.execute(query).scalar_one())
