"""`codebot history export`: one table's rows in a time range, as JSON lines or CSV.

Rows are read in time order in pages (EXPORT_PAGE), so any range streams in bounded memory.
Texts are hostile: JSON escapes them; in CSV a cell starting with = + - @ (or a tab or carriage
return) is prefixed with ' so that a spreadsheet shows it as text instead of running it
(OWASP "CSV injection").
"""

from __future__ import annotations

import csv
import json
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, TextIO

from sqlalchemy import Engine, Table, select, tuple_

from worker.history import schema

EXPORT_PAGE = 1000
FORMATS = ("jsonl", "csv")
TABLES: dict[str, Table] = {table.name: table for table in schema.TABLES}
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_AGO = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(text: str, now: float | None = None) -> float:
    """`7d`, `12h`, `30m` ago; an ISO date or time (UTC unless it says otherwise); epoch seconds."""
    text = text.strip()
    now = time.time() if now is None else now
    ago = _AGO.match(text)
    if ago:
        return now - float(ago.group(1)) * _UNIT_SECONDS[ago.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--since {text!r}: give 7d, 12h, 30m, a date (2026-01-31) or a time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def rows_since(
    engine: Engine, table: Table, since: float, until: float | None = None
) -> Iterator[dict[str, Any]]:
    """The table's rows with since <= at < until, oldest first, read a page at a time."""
    key = [table.c.at, *table.primary_key.columns]
    after: tuple[Any, ...] | None = None
    while True:
        query = select(table).where(table.c.at >= since).order_by(*key).limit(EXPORT_PAGE)
        if until is not None:
            query = query.where(table.c.at < until)
        if after is not None:
            query = query.where(tuple_(*key) > tuple_(*after))
        with engine.connect() as connection:
            page = [dict(row._mapping) for row in connection.execute(query)]
        yield from page
        if len(page) < EXPORT_PAGE:
            return
        after = tuple(page[-1][column.name] for column in key)


def write_rows(rows: Iterator[dict[str, Any]], table: Table, fmt: str, out: TextIO) -> int:
    """Write the rows in `fmt`; the number written."""
    written = 0
    if fmt == "jsonl":
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            written += 1
        return written
    writer = csv.DictWriter(out, fieldnames=[column.name for column in table.columns])
    writer.writeheader()
    for row in rows:
        writer.writerow({name: csv_cell(value) for name, value in row.items()})
        written += 1
    return written


def csv_cell(value: object) -> object:
    """A cell a spreadsheet shows as written: text starting like a formula gets a leading '."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value
