"""Text of others never drives a terminal or forges a log line: `codebot ask`, `codebot tool`,
`codebot feedback list` and the MCP server's log, run as real processes over hostile text."""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text

from config.settings import load_settings
from tests.support.cli import run_codebot
from tests.support.e2e import DEFAULT_FILES
from tests.support.fixture_repos import git, make_repo
from tests.support.mcp_rig import served_repo, stdio_client_for
from tests.support.model_server import ScriptedModel, text, tool_calls
from worker.jobs.feedback import record_answer, record_reason, record_vote
from worker.jobs.question import Question, ReplyTarget
from worker.jobs.sink import Answer
from worker.ops.inert import TerminalGuard
from worker.ops.logs import TextFormatter
from worker.ops.redis_connection import connect, stop_embedded_server

# An OSC 8 hyperlink, an OSC 52 clipboard write, a screen clear, an 8-bit CSI and a bidi override.
HOSTILE = (
    "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07 \x1b]52;c;cm0gLXJmIH4=\x07 \x1b[2J \x9b31m \u202e"
)
ESCAPES = ("\x1b", "\x9b", "\x07", "\u202e")


def no_escape(output: str) -> bool:
    return not any(c in output for c in ESCAPES)


@pytest.fixture
def project(tmp_path: Path) -> Iterator[dict[str, str]]:
    make_repo(tmp_path / "src", DEFAULT_FILES)
    author = f"--author=mallory {HOSTILE} <m@example.invalid>"
    git(tmp_path / "src", "commit", "-q", "--allow-empty", author, "-m", f"fix retries {HOSTILE} done")
    (tmp_path / "repos.toml").write_text(f'[[repo]]\nname = "payments"\nurl = "{tmp_path / "src"}"\n')
    yield {
        "CODEBOT_DATA_DIR": str(tmp_path / "data"),
        "CODEBOT_REPOS_FILE": str(tmp_path / "repos.toml"),
        "CODEBOT_MODEL_MAX_RETRIES": "0",
    }
    stop_embedded_server(load_settings(env_file=None, data_dir=tmp_path / "data"))


def codebot(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_codebot(*args, env=env, timeout=120)


def test_ask_prints_hostile_progress_as_text_and_an_answer_without_escapes(project: dict[str, str]) -> None:
    with ScriptedModel() as model:
        model.enqueue(
            tool_calls(
                ("read_file", {"repo": "payments", "path": f"[/] [link=https://evil.example]x{HOSTILE}"}),
                ("read_file", {"repo": "payments", "path": "payments/retry.py"}),  # code read: an answer
            ),
            text(f"It retries [payments:payments/retry.py#L3]. {HOSTILE} the end"),
        )
        result = codebot(
            {**project, "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "k"}, "ask", "retry?"
        )
    assert result.returncode == 0, result.stderr  # no MarkupError lost the answer
    assert "reading `[/] [link=https://evil.example]x" in result.stdout  # shown as typed, not markup
    assert "It retries" in result.stdout and "the end" in result.stdout
    assert no_escape(result.stdout) and no_escape(result.stderr)


def test_tool_shows_a_hostile_commit_author_and_message_without_a_raw_control_character(
    project: dict[str, str],
) -> None:
    assert codebot(project, "repos", "sync").returncode == 0
    result = codebot(project, "tool", "log", "--args", '{"repo": "payments"}')
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)["text"]
    assert "fix retries" in shown and "mallory" in shown
    assert no_escape(result.stdout) and no_escape(result.stderr)


def test_feedback_list_shows_hostile_reasons_and_names_without_escapes(project: dict[str, str]) -> None:
    settings = load_settings(env_file=None, data_dir=Path(project["CODEBOT_DATA_DIR"]))
    redis = connect(settings)
    question = Question(
        id="q-slack-1",
        asker=f"mallory{HOSTILE}",
        target=ReplyTarget(platform="slack", channel="C1"),
        text=f"why {HOSTILE}?",
        repos=["payments"],
    )
    record_answer(redis, settings, question, Answer(markdown="it retries"), {})
    assert record_vote(redis, settings, question.id, "slack", f"U1{HOSTILE}", "down", "C1") == "new"
    assert record_reason(redis, settings, question.id, f"U1{HOSTILE}", f"wrong {HOSTILE} [/x]")
    result = codebot(project, "feedback", "list")
    assert result.returncode == 0, result.stderr
    assert "wrong" in result.stdout and "[/x]" in result.stdout
    assert no_escape(result.stdout) and no_escape(result.stderr)
    exported = codebot(project, "feedback", "export", "--output", "-")
    assert exported.returncode == 0 and no_escape(exported.stdout)
    assert HOSTILE in json.loads(exported.stdout.splitlines()[0])["question"]  # kept, as escapes


def test_a_log_line_stays_one_line_and_shows_escapes_instead_of_sending_them() -> None:
    record = logging.LogRecord(
        "codebot", logging.INFO, __file__, 1, "asked %s", (f"x\nFAKE INFO line{HOSTILE}",), None
    )
    line = TextFormatter().format(record)
    assert "\n" not in line and no_escape(line)
    assert "x\\nFAKE INFO line\\x1b]8;;https://evil.example" in line


def test_the_mcp_server_logs_which_tool_ran_but_never_its_arguments_or_the_question(tmp_path: Path) -> None:
    marker = "Zq7marker"
    with served_repo(tmp_path) as served:
        served.model.enqueue(text("It retries [payments:payments/retry.py#L3]."))
        with stdio_client_for(served) as client:
            client.tool("search", {"pattern": f"{marker}pattern", "repo": "payments"})
            client.tool("read_file", {"repo": "payments", "path": f"{marker}/path{HOSTILE}"})
            client.tool("ask", {"question": f"{marker} question about retries?"})
        log = (served.root / "mcp-stderr.log").read_text(encoding="utf-8")
    assert re.search(r"mcp tool=search ok=\w+ args=pattern,repo", log)
    assert re.search(r"mcp tool=read_file ok=False args=path,repo", log)
    assert marker not in log and no_escape(log)


def test_the_cli_console_passes_rich_styles_to_a_terminal_but_no_escape_sequence_of_others() -> None:
    # The console every `codebot` command prints with (status, repos, feedback, ask) writes
    # through this guard, whatever path a text took to it.
    screen = io.StringIO()
    guard = TerminalGuard(screen)
    console = Console(file=guard, force_terminal=True, color_system="standard", highlight=False)  # type: ignore[arg-type]
    console.print(Text(f"repo payments: {HOSTILE}", style="bold"))
    console.print(f"last commit: {HOSTILE}", markup=False)
    shown = screen.getvalue()
    assert "\x1b[1m" in shown  # Rich's own bold
    assert "\x1b]" not in shown and "\x1b[2J" not in shown and "\x9b" not in shown and "\x07" not in shown
    assert "repo payments:" in shown and "last commit:" in shown  # (Rich drops the BEL, so the OSC runs on)
