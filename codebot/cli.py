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
from typing import TYPE_CHECKING, TypeAlias

from codebot.cli_history import add_history, cmd_history
from config.errors import ConfigError
from worker.jobs.exit_codes import EXIT_FAILED, EXIT_USAGE, ask_exit_codes_help
from worker.ops.inert import inert, json_without_controls

if TYPE_CHECKING:
    from rich.console import Console

    from config.settings import Settings

# `codebot ask`'s exit codes, written from the one table of outcome, code and words
ASK_EXIT_CODES = ask_exit_codes_help()


# What add_subparsers returns (argparse names it nowhere public).
_Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (0-65535)")
    return port


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("codebot")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _tool_names() -> str:
    """Every tool the model has, from the registry itself: the help cannot drift from it."""
    from worker.tools import TOOL_FUNCTIONS

    return ", ".join(function.__name__ for function in TOOL_FUNCTIONS)


class _ToolNamesHelp(str):
    """`codebot tool NAME`'s help, naming the tools only when a help is shown: the registry
    imports every tool, which `codebot --version` and every other command do without."""

    def __mod__(self, _params: object) -> str:  # argparse expands a help string with %
        return f"one of: {_tool_names()}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codebot", description="Answers questions about your code, citing the lines."
    )
    parser.add_argument("--version", action="version", version=f"codebot {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # In this order in `codebot --help`.
    _add_answering(sub)
    _add_repos_and_tools(sub)
    _add_servers(sub)
    _add_operations(sub)
    add_history(sub)
    return parser


def _add_answering(sub: _Commands) -> None:
    """`ask` and `worker`: answering questions."""
    ask = sub.add_parser("ask", help="ask a question from the terminal", epilog=ASK_EXIT_CODES)
    ask.add_argument("question", nargs="+", help="the question (repo:NAME in it limits the repos)")
    ask.add_argument("--repo", help="limit the question to this repo")
    ask.add_argument(
        "--context",
        metavar="FILE",
        type=Path,
        help="a log or stack trace the question is about (default: stdin when it is not a terminal); "
        "redacted, its end kept within CODEBOT_THREAD_CONTEXT_CHARS",
    )
    ask.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="log lines on stderr too (default: only in CODEBOT_DATA_DIR/logs/ask.log)",
    )

    worker = sub.add_parser("worker", help="run RQ workers that answer questions")
    worker.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    worker.add_argument(
        "--concurrency", type=int, default=1, help="questions answered in parallel (default 1)"
    )
    worker.add_argument(
        "--processes",
        type=int,
        default=1,
        help="worker processes the questions are spread over, as threads (default 1)",
    )
    worker.add_argument(
        "--pool",
        choices=["threads", "fork"],
        default="threads",
        help="threads: many questions per process (default); fork: a forked process per question",
    )


def _add_repos_and_tools(sub: _Commands) -> None:
    """`repos`, `tool` and `eval`: the whitelist's mirrors, one tool call, the golden questions."""
    repos = sub.add_parser("repos", help="the repository whitelist and its mirrors")
    repos_sub = repos.add_subparsers(dest="repos_command", required=True, metavar="ACTION")
    repos_sub.add_parser("list", help="show each repo: branch, commit, age, size")
    sync = repos_sub.add_parser("sync", help="clone what is missing, refresh the rest")
    sync.add_argument("names", nargs="*", help="repos to sync (default: all)")

    tool = sub.add_parser("tool", help="run one agent tool directly (JSON out)")
    tool.add_argument("name", help=_ToolNamesHelp("one of the model's tools"))
    tool.add_argument("--args", default="{}", help='the arguments as JSON, e.g. \'{"pattern": "retry"}\'')

    evaluate = sub.add_parser("eval", help="run golden questions through the real agent")
    evaluate.add_argument("file", help="a .jsonl file of golden questions")
    evaluate.add_argument("--csv", default="eval-results.csv", help="where to write the per-question CSV")


def _add_servers(sub: _Commands) -> None:
    """`mcp`, `slack`, `discord`, `web` and `webhooks`: the long-running servers."""
    mcp = sub.add_parser("mcp", help="serve the tools and `ask` over the Model Context Protocol")
    mcp.add_argument(
        "--http", action="store_true", help="streamable HTTP instead of stdio (needs CODEBOT_MCP_TOKEN)"
    )
    mcp.add_argument("--port", type=_port, default=8765, help="HTTP port (default 8765)")
    mcp.add_argument("--host", help="HTTP address to listen on (default CODEBOT_MCP_HTTP_HOST, 127.0.0.1)")

    slack = sub.add_parser("slack", help="run the Slack adapter")
    slack.add_argument(
        "--port", type=_port, default=3000, help="HTTP port when not in Socket Mode (default 3000)"
    )
    slack.add_argument(
        "--host", help="HTTP address to listen on (default CODEBOT_SLACK_HTTP_HOST, 127.0.0.1)"
    )
    sub.add_parser("discord", help="run the Discord adapter")

    web = sub.add_parser("web", help="the operators' read-only web console (token required)")
    web.add_argument("--host", help="address to listen on (default CODEBOT_WEB_HOST, 127.0.0.1)")
    web.add_argument("--port", type=_port, help="port to listen on (default CODEBOT_WEB_PORT, 8780)")

    hooks = sub.add_parser("webhooks", help="receive forge pushes: a push refreshes its repo within seconds")
    hooks.add_argument("--host", help="address to listen on (default CODEBOT_WEBHOOKS_HOST, 127.0.0.1)")
    hooks.add_argument("--port", type=_port, help="port to listen on (default CODEBOT_WEBHOOKS_PORT, 8790)")


def _add_operations(sub: _Commands) -> None:
    """`status`, `feedback` and `redis`: what operators look at and stop."""
    status = sub.add_parser(
        "status", help="queue, workers, failures, refreshes, model endpoints and today's usage"
    )
    status.add_argument("--json", action="store_true", help="one JSON object instead of the terminal view")

    votes = sub.add_parser("feedback", help="👍/👎 users gave answers")
    votes_sub = votes.add_subparsers(dest="feedback_command", required=True, metavar="ACTION")
    listing = votes_sub.add_parser("list", help="the latest votes, with reasons")
    listing.add_argument("--limit", type=int, default=20, help="how many votes (default 20)")
    export = votes_sub.add_parser("export", help="JSONL golden questions for `codebot eval`")
    export.add_argument("--output", "-o", default="-", help="the file to write (default: standard output)")

    redis_cmd = sub.add_parser("redis", help="the embedded Redis server")
    redis_sub = redis_cmd.add_subparsers(dest="redis_command", required=True, metavar="ACTION")
    stop = redis_sub.add_parser("stop", help="stop the embedded server (its data is kept)")
    stop.add_argument(
        "--nosave",
        action="store_true",
        help="skip the final snapshot (when the disk is full): the append-only file keeps what it holds",
    )


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
    args = _parser().parse_args(argv)
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
