"""Turn on SQLite's write-ahead log, waiting out a second process doing the same.

Switching a database to WAL needs an exclusive lock, and SQLite answers "database is locked" to a
connection that asks while another is switching or recovering the same new file without calling
its busy handler (so `sqlite3.connect(timeout=...)` does not help). Two `codebot repos sync`
threads opening one fresh blob store hit it. The mode is kept in the file, so once it is "wal",
asking again changes nothing and takes no lock.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

RETRY_FIRST_SECONDS = 0.02  # the first pause; each next one doubles, to RETRY_MAX_SECONDS
RETRY_MAX_SECONDS = 0.5


def use_wal(db: Any, within_seconds: float = 60.0) -> None:
    """Put `db` (a sqlite3 connection) in WAL mode, retrying a locked switch for `within_seconds`."""
    give_up = time.monotonic() + within_seconds
    pause = RETRY_FIRST_SECONDS
    while True:
        try:
            cursor = db.cursor()
            try:
                cursor.execute("PRAGMA journal_mode")
                if str(cursor.fetchone()[0]).lower() != "wal":
                    cursor.execute("PRAGMA journal_mode=WAL")
                return
            finally:
                cursor.close()
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) and "busy" not in str(error):
                raise
            if time.monotonic() >= give_up:
                raise
        time.sleep(pause)
        pause = min(pause * 2, RETRY_MAX_SECONDS)
