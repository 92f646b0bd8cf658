"""`codebot`'s arguments: every command, its options and their help, in `codebot --help`'s order.

Only the standard library and light modules are imported here (`codebot --version` and `--help`
start without pydantic, Rich, Redis or the worker; tests/test_cli_start.py checks that).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeAlias

from codebot.cli_history import add_history
from worker.jobs.exit_codes import ask_exit_codes_help

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


def build_parser() -> argparse.ArgumentParser:
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
