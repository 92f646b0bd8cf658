"""`codebot ask --context FILE` and a log piped on stdin: the pasted text is the question's
context, redacted and within the same budget as a chat thread's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from config.settings import load_settings
from tests.support.cli import run_codebot
from tests.support.e2e import DEFAULT_FILES
from tests.support.fixture_repos import make_repo
from tests.support.model_server import ScriptedModel, text, tool_calls
from worker.ops.redis_connection import stop_embedded_server

READ_RETRY = ("read_file", {"repo": "payments", "path": "payments/retry.py", "end_line": 13})
TOKEN = "ghp_" + "a1B2" * 9
LOG = f"INFO start\nauth with {TOKEN}\nERROR PaymentDeclined: card_expired at payments/retry.py:9\n"


@pytest.fixture
def project(tmp_path: Path) -> Iterator[dict[str, str]]:
    make_repo(tmp_path / "payments-src", DEFAULT_FILES)
    repos = tmp_path / "repos.toml"
    repos.write_text(f'[[repo]]\nname = "payments"\nurl = "{tmp_path / "payments-src"}"\n')
    yield {
        "CODEBOT_DATA_DIR": str(tmp_path / "data"),
        "CODEBOT_REPOS_FILE": str(repos),
        "CODEBOT_MODEL_MAX_RETRIES": "0",
        "OPENAI_API_KEY": "k",
    }
    stop_embedded_server(load_settings(env_file=None, data_dir=tmp_path / "data"))


def ask(project: dict[str, str], *args: str, stdin: str = "") -> tuple[str, str]:
    """The first model request's question message, and what the asker saw."""
    with ScriptedModel() as model:
        model.enqueue(tool_calls(READ_RETRY), text("The card expired."))
        result = run_codebot("ask", *args, env={**project, "OPENAI_BASE_URL": model.base_url}, stdin=stdin)
        assert result.returncode == 0, result.stderr
        return str(model.requests[0]["messages"][-1]["content"]), result.stdout


def test_a_log_given_with_context_file_reaches_the_model_redacted(
    project: dict[str, str], tmp_path: Path
) -> None:
    log_file = tmp_path / "crash.log"
    log_file.write_text(LOG, encoding="utf-8")
    sent, shown = ask(project, "--context", str(log_file), "why does checkout fail?")
    assert "PaymentDeclined: card_expired" in sent and sent.endswith("why does checkout fail?")
    assert "a1B2a1B2" not in sent
    assert "The card expired." in shown
    stored = (Path(project["CODEBOT_DATA_DIR"]) / "logs" / "ask.log").read_text(encoding="utf-8")
    assert "a1B2a1B2" not in stored


def test_a_log_piped_on_stdin_keeps_its_end_within_the_budget(project: dict[str, str]) -> None:
    piped = "".join(f"noise line {n:05d}\n" for n in range(5000)) + LOG
    sent, _ = ask({**project, "CODEBOT_THREAD_CONTEXT_CHARS": "2000"}, "what broke?", stdin=piped)
    assert "PaymentDeclined: card_expired" in sent and "noise line 04999" in sent
    assert "noise line 00000" not in sent
    assert "the start of this text was cut to fit the context budget" in sent
    assert "a1B2a1B2" not in sent


def test_a_missing_context_file_is_said_plainly_and_nothing_is_asked(
    project: dict[str, str], tmp_path: Path
) -> None:
    result = run_codebot("ask", "--context", str(tmp_path / "nope.log"), "why?", env=project)
    assert result.returncode == 2
    assert "--context" in result.stdout and "No such file or directory" in result.stdout
    assert "Traceback" not in result.stderr
