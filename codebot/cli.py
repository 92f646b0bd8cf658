"""The `codebot` command: settings are built once here and passed down to every process.

Bad configuration ends the process with one line naming the variable or file:line at fault.
Only the standard library and modules that import nothing heavy are imported at the top:
`codebot --version` and `--help` start without pydantic, Rich, Redis or the worker (each
command imports what it runs; tests/test_cli_start.py checks what `--version` loads).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from codebot.cli_history import cmd_history
from codebot.cli_parser import build_parser
from config.errors import ConfigError
from worker.jobs.exit_codes import EXIT_FAILED, EXIT_USAGE
from worker.ops.inert import inert, json_without_controls

if TYPE_CHECKING:
    from rich.console import Console

    from config.settings import Settings


def _cmd_ask(settings: Settings, args: argparse.Namespace, out: Console) -> int:
    from codebot.wiring import build_runtime  # a burst worker here may take any platform's question
    from worker.jobs.console import run_ask
    from worker.ops.redis_connection import connect

    try:
        pasted = _pasted_context(args.context)
    except OSError as exc:
        out.print(inert(f"--context {args.context}: {exc.strerror or exc}"), markup=False, soft_wrap=True)
        return 2
    runtime = build_runtime(settings)
    question = " ".join(args.question)
    return run_ask(runtime, lambda: connect(settings), question, args.repo, out, pasted=pasted)


def _pasted_context(path: Path | None) -> str:
    """`--context FILE`, else stdin when something is piped in (a terminal is left alone)."""
    if path is not None:
        return path.read_bytes().decode("utf-8", errors="replace")
    if sys.stdin is None or sys.stdin.isatty():
        return ""
    return sys.stdin.buffer.read().decode("utf-8", errors="replace")


def _cmd_worker(settings: Settings, args: argparse.Namespace, out: Console) -> int:
    from codebot.wiring import build_runtime
    from worker.jobs.console import missing_model_message
    from worker.jobs.process import run_workers
    from worker.ops.redis_connection import connect

    if args.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    if args.processes < 1:
        raise ConfigError("--processes must be at least 1")
    if args.pool == "fork" and args.processes != 1:
        raise ConfigError("--processes goes with --pool threads (--pool fork runs one process per question)")
    connect(settings)  # fail now, with one line, if Redis is unreachable
    missing_model = missing_model_message(settings)
    if missing_model:
        # A worker without a model would turn every question into an apology.
        raise ConfigError(
            "OPENAI_API_KEY / OPENAI_BASE_URL: not set — a worker needs a model endpoint (see `codebot ask` or docs/models.md)"
        )
    return run_workers(
        build_runtime(settings),
        burst=args.burst,
        concurrency=args.concurrency,
        processes=args.processes,
        pool=args.pool,
    )


def _cmd_repos(settings: Settings, args: argparse.Namespace, out: Console) -> int:
    from config.repos import load_whitelist
    from worker.ops.redis_connection import RedisUnavailable, connect, embedded
    from worker.repos.sync_cli import NO_EMBEDDED_REDIS, run_list, run_sync

    whitelist = load_whitelist(settings.resolved_repos_file)
    if args.repos_command == "list":
        return run_list(settings, whitelist, out)
    # Where the syncs are recorded: Redis as configured, or the embedded one if it runs (a sync
    # starts no server of its own: with none running, no machine is answering to follow it).
    if not (settings.redis_url or settings.redis_sentinels or embedded(settings).answers()):
        return run_sync(settings, whitelist, list(args.names), out, not_recorded=NO_EMBEDDED_REDIS)
    try:
        redis = connect(settings, start_embedded=False)
    except RedisUnavailable as exc:
        return run_sync(settings, whitelist, list(args.names), out, not_recorded=str(exc))
    return run_sync(settings, whitelist, list(args.names), out, redis)


def _cmd_tool(settings: Settings, args: argparse.Namespace, out: Console) -> int:
    from worker.jobs.runtime import build_runtime
    from worker.tools import make_context

    runtime = build_runtime(settings)
    names = runtime.whitelist.names()
    with runtime.mirrors.lease(names) as snapshots:
        unsynced = [n for n in names if n not in snapshots]
        ctx = make_context(settings, snapshots)
        outcome = runtime.registry.call(ctx, args.name, args.args)
    record: dict[str, object] = {"tool": args.name, "ok": outcome.ok}
    if outcome.ok:
        record.update({"text": outcome.text, "data": outcome.data})
    else:
        record["error"] = outcome.text.removeprefix("Error: ")
    if unsynced:  # e.g. list_repos before `codebot repos sync`: say why a repo is missing
        record["unsynced_repos"] = unsynced
    # JSON escapes C0 controls itself; C1 and bidi controls are escaped here (still valid JSON).
    sys.stdout.write(json_without_controls(json.dumps(record, ensure_ascii=False, indent=2)) + "\n")
    return 0 if outcome.ok else 1


def _cmd_eval(settings: Settings, args: argparse.Namespace, out: Console) -> int:
    from worker.jobs.evaluate import run_eval

    return run_eval(settings, args.file, args.csv, out)


def _cmd_mcp(settings: Settings, args: argparse.Namespace, out: Console) -> int:
    from bot.mcp.server import serve_http, serve_stdio
    from worker.jobs.runtime import build_runtime

    runtime = build_runtime(settings)
    if args.http:
        return serve_http(runtime, args.host or settings.mcp_http_host, args.port)
    return serve_stdio(runtime)


def _cmd_slack(settings: Settings, args: argparse.Namespace, out: Console) -> int:
    from bot.slack.app import serve

    return serve(settings, port=args.port, host=args.host)


def _cmd_discord(settings: Settings, args: argparse.Namespace, out: Console) -> int:
    from bot.discord.app import serve

    return serve(settings)


def _cmd_web(settings: Settings, args: argparse.Namespace, out: Console) -> int:
    from bot.web.server import serve

    host = args.host or settings.web_host
    return serve(settings, host, settings.web_port if args.port is None else args.port)


def _cmd_webhooks(settings: Settings, args: argparse.Namespace, out: Console) -> int:
    from bot.webhooks.server import serve

    port = settings.webhooks_port if args.port is None else args.port
    return serve(settings, args.host or settings.webhooks_host, port)


def _cmd_status(settings: Settings, args: argparse.Namespace, out: Console) -> int:
    from worker.jobs.runtime import build_runtime
    from worker.jobs.status_view import render_status, status_facts
    from worker.ops.redis_connection import connect, describe, failure_line, write_trouble

    redis = connect(settings, check_writes=False)
    refused = write_trouble(redis)
    if refused is not None:  # reading the queue's state writes too (RQ cleans its registries as it reads)
        line = failure_line(describe(settings), refused)
        if args.json:
            sys.stdout.write(json.dumps({"queue": {"redis": describe(settings), "error": line}}) + "\n")
        else:
            out.print(f"queue: {line}", markup=False, soft_wrap=True)
        return EXIT_FAILED
    facts = status_facts(redis, build_runtime(settings))
    if args.json:
        sys.stdout.write(json.dumps(facts, ensure_ascii=False, indent=2) + "\n")
    else:
        render_status(facts, out)
    return 0


def _cmd_feedback(settings: Settings, args: argparse.Namespace, out: Console) -> int:
    from worker.jobs.feedback_cli import run_export, run_list
    from worker.ops.redis_connection import connect

    redis = connect(settings)
    if args.feedback_command == "list":
        return run_list(redis, args.limit, out)
    return run_export(redis, args.output, out)


def _cmd_redis(settings: Settings, args: argparse.Namespace, out: Console) -> int:
    from worker.ops.redis_connection import RedisUnavailable, StopOutcome, describe, embedded

    if settings.redis_url or settings.redis_sentinels:
        out.print("REDIS_URL or REDIS_SENTINELS is set: codebot does not manage that server.")
        return EXIT_USAGE
    server = embedded(settings)
    outcome = server.stop(save=not args.nosave)
    if outcome is StopOutcome.STOPPED:
        out.print(f"stopped {describe(settings)}", markup=False, soft_wrap=True)
        return 0
    if outcome is StopOutcome.NOT_RUNNING:
        out.print("the embedded Redis was not running")
        return 0
    if outcome is StopOutcome.NOT_ANSWERING:
        raise RedisUnavailable(
            f"{describe(settings)} (pid {server.pid() or '?'}) is running but not answering, so it was "
            f"not stopped: it may be hung or stopped (SIGSTOP), or still loading; see {server.logfile}"
        )
    raise RedisUnavailable(
        f"{describe(settings)} could not write its final snapshot and is still running (is the disk "
        f"full? see {server.logfile}): free space and run `codebot redis stop` again, or "
        "`codebot redis stop --nosave` (the append-only file keeps what it holds)"
    )


def _writes_data_dir(args: argparse.Namespace) -> bool:
    """Commands that clone, snapshot or answer: they write mirrors under CODEBOT_DATA_DIR."""
    return args.command in ("ask", "worker", "eval", "mcp") or (
        args.command == "repos" and args.repos_command == "sync"
    )


def check_data_dir(settings: Settings) -> None:
    """CODEBOT_DATA_DIR must be, or become, a writable directory: one line now, not a traceback later."""
    path = settings.data_dir
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"CODEBOT_DATA_DIR: cannot create {path} ({exc.strerror})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"CODEBOT_DATA_DIR: {path} is not writable by this user")


COMMANDS: dict[str, Callable[[Settings, argparse.Namespace, Console], int]] = {
    "ask": _cmd_ask,
    "worker": _cmd_worker,
    "repos": _cmd_repos,
    "tool": _cmd_tool,
    "eval": _cmd_eval,
    "mcp": _cmd_mcp,
    "slack": _cmd_slack,
    "discord": _cmd_discord,
    "web": _cmd_web,
    "webhooks": _cmd_webhooks,
    "status": _cmd_status,
    "feedback": _cmd_feedback,
    "redis": _cmd_redis,
    "history": cmd_history,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from redis.exceptions import RedisError
    from rich.console import Console

    from config.env_check import check_names
    from config.settings import Settings, load_settings
    from worker.ops.inert import TerminalGuard
    from worker.ops.logs import configure_logging
    from worker.ops.redis_connection import RedisUnavailable, describe, failure_line

    # Every byte for the terminal passes the guard: no OSC/ESC sequence of others reaches it.
    out = Console(highlight=False, file=TerminalGuard(sys.stdout))  # type: ignore[arg-type]

    settings: Settings | None = None
    try:
        settings = load_settings()
        for warning in check_names(Settings, env_file=Path(".env")):
            print(warning, file=sys.stderr)
        if _writes_data_dir(args):
            check_data_dir(settings)
        quiet = args.command == "ask" and not args.verbose
        # `codebot ask`: the screen is the answer's; log lines go to a file unless asked for
        configure_logging(settings, log_file=settings.data_dir / "logs" / "ask.log" if quiet else None)
        return COMMANDS[args.command](settings, args, out)
    except (ConfigError, RedisUnavailable) as exc:
        print(f"codebot: {inert(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except RedisError as exc:  # Redis failing after the start: unreachable, or refusing writes
        where = describe(settings) if settings else "Redis"
        print(f"codebot: {inert(failure_line(where, exc))}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
