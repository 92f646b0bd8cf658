"""`codebot history record` and `codebot history export` (the parser is codebot/cli_history.py)."""

from __future__ import annotations

import signal
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from redis import Redis
from rich.console import Console

from config.errors import ConfigError
from config.settings import Settings
from worker.history.export import FORMATS, TABLES, parse_since, rows_since, write_rows
from worker.history.recorder import Recorder
from worker.history.store import history_url, open_engine, upgrade
from worker.ops.metrics import serve_metrics


def run_record(
    settings: Settings,
    redis: Redis,
    drain: bool,
    batch: int,
    consumer: str,
    out: Console,
    queue_depth: Callable[[Redis], int] | None = None,
) -> int:
    """Record the stream into the database until SIGTERM or SIGINT (a batch in flight is
    finished: it is one transaction, then acknowledged), or (drain) until nothing is left.
    With CODEBOT_METRICS_PORT (and `queue_depth`, the questions queue's gauge as every role
    exports it) it serves /metrics and a /health that fails when the loop stops coming round."""
    engine = open_engine(history_url(settings))
    upgrade(engine)
    stop = threading.Event()

    def stop_on(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, stop_on)
    signal.signal(signal.SIGINT, stop_on)
    recorder = Recorder(
        redis,
        engine,
        consumer=consumer or socket.gethostname(),
        retention_days=settings.history_retention_days,
        batch=batch,
    )
    if settings.metrics_port is not None and queue_depth is not None and not drain:
        serve_metrics(
            redis,
            settings.metrics_port,
            queue_depth,
            host=settings.metrics_host,
            health=recorder.unhealthy_reason,
        )
    recorded = recorder.run(stop, drain=drain)
    out.print(f"history: {recorded} events recorded", markup=False, highlight=False)
    return 0


def run_export(settings: Settings, since: str, until: str | None, fmt: str, table: str, output: str) -> int:
    """Write one table's rows of [since, until) to `output` ("-": standard output)."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
    if table not in TABLES:
        raise ConfigError(f"--table {table!r}: one of {', '.join(TABLES)}")
    try:
        start = parse_since(since)
        end = parse_since(until) if until else None
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    engine = open_engine(history_url(settings))
    upgrade(engine)
    rows = rows_since(engine, TABLES[table], start, end)
    if output == "-":
        written = write_rows(rows, TABLES[table], fmt, sys.stdout)
    else:
        with Path(output).open("w", encoding="utf-8", newline="") as file:
            written = write_rows(rows, TABLES[table], fmt, file)
    print(f"history: {written} {table} rows written", file=sys.stderr)
    return 0
