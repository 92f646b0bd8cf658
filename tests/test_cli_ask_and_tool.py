"""`codebot ask` and `codebot tool` as a user runs them: real subprocesses, real repo, scripted model."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from codebot.cli_parser import ASK_EXIT_CODES
from config.settings import load_settings
from tests.support.cli import run_codebot
from tests.support.e2e import DEFAULT_FILES
from tests.support.fixture_repos import make_repo
from tests.support.model_server import ScriptedModel, cut_stream, ignores_tools, text, tool_calls
from worker.jobs.console import MISSING_MODEL_MESSAGE
from worker.jobs.outcomes import EXIT_CODES, EXIT_CUT_OFF, EXIT_NOT_AN_ANSWER
from worker.jobs.scope import redact_and_extract_repos
from worker.ops.redis_connection import stop_embedded_server


@pytest.fixture
def project(tmp_path: Path) -> Iterator[dict[str, str]]:
    source = tmp_path / "payments-src"
    make_repo(source, DEFAULT_FILES)
    repos = tmp_path / "repos.toml"
    repos.write_text(
        f'[[repo]]\nname = "payments"\nurl = "{source}"\nweb_url = "https://gitlab.com/acme/payments"\n'
    )
    env = {
        "CODEBOT_DATA_DIR": str(tmp_path / "data"),
        "CODEBOT_REPOS_FILE": str(repos),
        "CODEBOT_MODEL_MAX_RETRIES": "0",
    }
    yield env
    stop_embedded_server(load_settings(env_file=None, data_dir=tmp_path / "data"))


def codebot(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_codebot(*args, env=env, timeout=120)


def test_ask_without_a_model_endpoint_says_exactly_what_to_set(project: dict[str, str]) -> None:
    result = codebot(project, "ask", "how does retry work?")
    assert result.returncode == 2
    assert "OPENAI_API_KEY=sk-" in result.stdout
    assert "OPENAI_BASE_URL=http://localhost:11434/v1" in result.stdout  # Ollama
    assert "openrouter.ai" in result.stdout
    for line in MISSING_MODEL_MESSAGE.format(model="gpt-5-mini").splitlines():
        assert line in result.stdout.splitlines()  # whole lines, to copy, at any terminal width


def test_ask_without_a_model_endpoint_names_commands_that_show_what_codebot_reads(
    project: dict[str, str],
) -> None:
    told = codebot(project, "ask", "how does retry work?").stdout
    hint = next(line for line in told.splitlines() if line.startswith("No endpoint yet?"))
    commands = [shlex.split(command) for command in hint.split("with no model: ", 1)[1].split(" && ")]
    assert [command[:2] for command in commands] == [["codebot", "repos"], ["codebot", "tool"]]
    for command in commands:
        result = codebot(project, *command[1:])
        assert result.returncode == 0, result.stdout + result.stderr
    found = json.loads(result.stdout)
    assert found["ok"] and found["data"]["matches"][0]["path"] == "payments/retry.py"


def test_ask_clones_the_repo_answers_in_process_and_prints_commit_pinned_links(
    project: dict[str, str],
) -> None:
    with ScriptedModel() as model:
        model.enqueue(
            tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py", "end_line": 13})),
            text("It sleeps `backoff * 2**attempt` [payments:payments/retry.py#L12]."),
        )
        env = {**project, "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "k"}
        result = codebot(env, "ask", "how does retry work?")
    assert result.returncode == 0, result.stderr
    assert "reading `payments/retry.py`" in result.stdout
    # the whole commit-pinned link on one line, whatever the terminal's width
    assert re.search(
        r"https://gitlab\.com/acme/payments/-/blob/[0-9a-f]{40}/payments/retry\.py#L12\)", result.stdout
    )
    assert "Sources" in result.stdout


def test_ask_about_an_unknown_repo_lists_the_repos_nearest_first(project: dict[str, str]) -> None:
    result = codebot({**project, "OPENAI_API_KEY": "k"}, "ask", "how does repo:paymnts retry?")
    assert result.returncode == 2
    assert "There is no repo `paymnts`" in result.stdout and "`payments`" in result.stdout


def test_tool_before_any_sync_names_the_unsynced_repos_even_when_it_succeeds(project: dict[str, str]) -> None:
    listed = codebot(project, "tool", "list_repos")
    assert listed.returncode == 0, listed.stderr
    record = json.loads(listed.stdout)
    assert record["data"]["repos"] == [] and record["unsynced_repos"] == ["payments"]


def test_tool_runs_one_tool_with_the_same_checks_and_prints_json(project: dict[str, str]) -> None:
    assert codebot(project, "repos", "sync").returncode == 0
    found = codebot(project, "tool", "search", "--args", '{"pattern": "MAX_ATTEMPTS", "repo": "payments"}')
    assert found.returncode == 0, found.stderr
    record = json.loads(found.stdout)
    assert record["ok"] is True and "payments/retry.py" in record["text"]
    refused = codebot(
        project, "tool", "read_file", "--args", '{"repo": "payments", "path": "../../etc/passwd"}'
    )
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["ok"] is False
    assert "root:" not in refused.stdout
    secret = codebot(project, "tool", "read_file", "--args", '{"repo": "payments", "path": ".env"}')
    assert secret.returncode == 1 and "sk_live" not in secret.stdout


def test_repo_at_the_end_of_a_sentence_names_the_repo_not_the_full_stop() -> None:
    assert redact_and_extract_repos("How does retry work in repo:payments.") == (
        "How does retry work in .",
        ["payments"],
    )
    assert redact_and_extract_repos("compare repo:a.b and repo:c-d") == ("compare and", ["a.b", "c-d"])


def test_tool_runs_the_history_tools_with_the_same_checks(project: dict[str, str]) -> None:
    assert codebot(project, "repos", "sync").returncode == 0
    shown = codebot(project, "tool", "show", "--args", '{"repo": "payments", "sha": "HEAD"}')
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert record["ok"] is True and "payments/retry.py" in record["text"] and "sk_live" not in shown.stdout
    refused = codebot(project, "tool", "diff", "--args", '{"repo": "payments", "from": "--output=x"}')
    assert (
        refused.returncode == 1 and "not something codebot can look up" in json.loads(refused.stdout)["error"]
    )


def test_ask_exits_3_with_the_no_code_read_reply_when_the_model_never_reads_code(
    project: dict[str, str],
) -> None:
    with ScriptedModel(ignores_tools("Retries usually use exponential backoff.")) as model:
        env = {**project, "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "k"}
        result = codebot(env, "ask", "how does retry work?")
    assert result.returncode == EXIT_NOT_AN_ANSWER == 3, result.stderr
    assert "No code was read" in result.stdout and "exponential backoff" not in result.stdout


def test_ask_exits_4_and_says_cut_off_when_every_attempt_at_the_reply_is_cut(project: dict[str, str]) -> None:
    with ScriptedModel() as model:
        model.enqueue(tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"})))
        model.set_handler(
            lambda _body: cut_stream(text("It sleeps longer after each failure, doubling."), done=False)
        )
        env = {**project, "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "k"}
        result = codebot(env, "ask", "how does retry work?")
    assert result.returncode == EXIT_CUT_OFF == 4, result.stderr
    assert "Cut off" in result.stdout and "cut off here" in result.stdout and "doubling" not in result.stdout


def test_ask_help_lists_the_exit_code_of_every_outcome_kind() -> None:
    helped = run_codebot("ask", "--help", env={}, timeout=110)
    listed = dict(re.findall(r"(\d) ([a-z][^;]*)", ASK_EXIT_CODES))
    assert " ".join(helped.stdout.split()).endswith(ASK_EXIT_CODES)
    for kind, code in EXIT_CODES.items():
        assert str(code) in listed, kind
    assert listed["0"].startswith("answered") and listed["3"].startswith("not an answer")
    assert listed["4"] == "cut off" and listed["5"].startswith("refused")
