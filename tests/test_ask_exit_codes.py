"""`codebot ask`'s exit code and its reply's words agree with `codebot ask --help`, for every
outcome it can end in: a reply that says "cut off" exits with the code the help gives for cut
off, one that says no code was read with that one, and so on (worker/jobs/exit_codes.py)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from config.settings import load_settings
from tests.support.cli import run_codebot
from tests.support.e2e import DEFAULT_FILES
from tests.support.fixture_repos import make_repo
from tests.support.model_server import (
    ScriptedModel,
    cut_stream,
    error,
    ignores_tools,
    text,
    tool_calls,
    trickle,
)
from worker.jobs.exit_codes import ASK_EXITS
from worker.ops.redis_connection import stop_embedded_server

READ = tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py", "end_line": 13}))
CITED = text("It sleeps `backoff * 2**attempt` [payments:payments/retry.py#L12].")
LONG = text("Retries back off exponentially. " * 40)  # at a byte every 2 s: far past the deadline


@pytest.fixture
def project(tmp_path: Path) -> Iterator[dict[str, str]]:
    source = tmp_path / "payments-src"
    make_repo(source, DEFAULT_FILES)
    (tmp_path / "repos.toml").write_text(f'[[repo]]\nname = "payments"\nurl = "{source}"\n')
    yield {
        "CODEBOT_DATA_DIR": str(tmp_path / "data"),
        "CODEBOT_REPOS_FILE": str(tmp_path / "repos.toml"),
        "CODEBOT_MODEL_MAX_RETRIES": "0",
        "OPENAI_API_KEY": "k",
    }
    stop_embedded_server(load_settings(env_file=None, data_dir=tmp_path / "data"))


def ask(env: dict[str, str], model: ScriptedModel, **more: str) -> subprocess.CompletedProcess[str]:
    return run_codebot(
        "ask", "how does retry work?", env={**env, **more, "OPENAI_BASE_URL": model.base_url}, timeout=120
    )


def answered(env: dict[str, str], model: ScriptedModel) -> subprocess.CompletedProcess[str]:
    model.enqueue(READ, CITED)
    return ask(env, model)


def failed(env: dict[str, str], model: ScriptedModel) -> subprocess.CompletedProcess[str]:
    model.set_handler(lambda _body: error(503, {"error": {"message": "overloaded"}}))
    return ask(env, model)


def no_code_read(env: dict[str, str], model: ScriptedModel) -> subprocess.CompletedProcess[str]:
    model.set_handler(ignores_tools("Retries usually use exponential backoff."))
    return ask(env, model)


def reply_cut_mid_stream(env: dict[str, str], model: ScriptedModel) -> subprocess.CompletedProcess[str]:
    model.enqueue(READ)
    model.set_handler(lambda _body: cut_stream(text("It doubles the wait each time."), done=False))
    return ask(env, model)


def reply_still_coming_at_the_deadline(
    env: dict[str, str], model: ScriptedModel
) -> subprocess.CompletedProcess[str]:
    model.set_handler(lambda _body: trickle(2.0, LONG))  # the apology says "so it was cut off"
    return ask(env, model, CODEBOT_QUESTION_DEADLINE_SECONDS="6")


def budget_spent(env: dict[str, str], model: ScriptedModel) -> subprocess.CompletedProcess[str]:
    model.enqueue(READ, CITED)
    assert ask(env, model, CODEBOT_DAILY_TOKEN_BUDGET="1").returncode == 0  # spends today's budget
    return ask(env, model, CODEBOT_DAILY_TOKEN_BUDGET="1")


Scenario = Callable[[dict[str, str], ScriptedModel], subprocess.CompletedProcess[str]]
SCENARIOS: list[tuple[Scenario, str]] = [
    (answered, "answered"),
    (failed, "failed"),
    (no_code_read, "not_an_answer"),
    (reply_cut_mid_stream, "cut_off"),
    (reply_still_coming_at_the_deadline, "cut_off"),
    (budget_spent, "budget_spent"),
]


def help_words() -> dict[int, str]:
    helped = run_codebot("ask", "--help", env={"COLUMNS": "400"}, timeout=110)
    epilog = " ".join(helped.stdout.split()).split("exit codes: ", 1)[1]
    return {int(code): words for code, words in re.findall(r"(\d) ([^;]+)", epilog)}


@pytest.mark.parametrize(("scenario", "kind"), SCENARIOS, ids=[s.__name__ for s, _ in SCENARIOS])
def test_the_exit_code_and_the_replys_words_are_those_ask_help_gives(
    project: dict[str, str], scenario: Scenario, kind: str
) -> None:
    with ScriptedModel() as model:
        result = scenario(project, model)
    row = ASK_EXITS[kind]
    assert result.returncode == row.code, result.stdout + result.stderr
    assert help_words()[row.code] == row.words
    assert not row.says or any(words in result.stdout for words in row.says), result.stdout
    others = {words for other in ASK_EXITS.values() if other.code != row.code for words in other.says}
    assert [words for words in others if words in result.stdout] == [], result.stdout
