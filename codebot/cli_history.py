"""`codebot history`: the operators' database (docs/history.md). Its parser and command; what
they run is worker/history/commands.py (imported only when the command runs)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from config.settings import Settings


def add_history(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    history = sub.add_parser("history", help="the history database: record it, export it")
    actions = history.add_subparsers(dest="history_command", required=True, metavar="ACTION")
    record = actions.add_parser("record", help="move the workers' history events into the database")
    record.add_argument("--drain", action="store_true", help="stop once no event is left to record")
    record.add_argument("--batch", type=int, default=500, help="events per transaction (default 500)")
    record.add_argument("--consumer", default="", help="this recorder's name (default: the host name)")
    export = actions.add_parser("export", help="one table's rows in a time range, as JSONL or CSV")
    export.add_argument("--since", required=True, help="7d, 12h, 30m, a date (2026-01-31) or a time")
    export.add_argument("--until", default=None, help="the range's end (default: now), as --since")
    export.add_argument("--format", default="jsonl", choices=("jsonl", "csv"))
    export.add_argument(
        "--table",
        default="questions",
        choices=("questions", "tool_calls", "votes", "reasons", "syncs", "model_events"),
    )
    export.add_argument("--output", "-o", default="-", help="the file to write (default: standard output)")


def cmd_history(settings: Settings, args: argparse.Namespace, out: Console) -> int:
    from config.errors import ConfigError
    from worker.history.commands import run_export, run_record
    from worker.jobs.queue import queue_depth
    from worker.ops.redis_connection import connect

    if args.history_command == "export":
        return run_export(settings, args.since, args.until, args.format, args.table, args.output)
    if args.batch < 1:
        raise ConfigError("--batch must be at least 1")
    return run_record(settings, connect(settings), args.drain, args.batch, args.consumer, out, queue_depth)
