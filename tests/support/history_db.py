"""The history's database for tests: `history_db` is an empty, migrated database, SQLite in the
test's directory or (the `postgresql` parameter, marked slow) a fresh database on one real
PostgreSQL server per test module (tests/support/postgres_server.py)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from tests.support.postgres_server import postgres_url
from worker.history.store import open_engine, upgrade

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)]
_numbers = itertools.count()


@dataclass(frozen=True)
class HistoryDb:
    url: str  # as CODEBOT_HISTORY_URL takes it
    engine: Engine


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[str]:
    with postgres_url() as url:
        yield url


@pytest.fixture(params=BACKENDS)
def history_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HistoryDb]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'history.sqlite3'}"
    else:
        server = make_url(request.getfixturevalue("postgres_server"))
        name = f"history_{next(_numbers)}"
        admin = create_engine(server.set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f"CREATE DATABASE {name}"))
        admin.dispose()
        url = server.set(database=name).render_as_string(hide_password=False)
    engine = open_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    upgrade(engine)
    yield HistoryDb(url, engine)
    engine.dispose()
