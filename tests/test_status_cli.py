"""`codebot status` in a terminal: drawn by Rich without chat markup, `--json` for scripts, an
endpoint no question ever reached is said to be "never reached" (not "every field accepted"),
one that answered but never completed a reply is said to be so, with the model it serves."""

from __future__ import annotations

import json
import re
from pathlib import Path

from config.settings import load_settings
from tests.support.cli import run_codebot
from tests.support.e2e import DEFAULT_FILES
from tests.support.fixture_repos import make_repo
from tests.support.model_server import ScriptedModel, text, trickle
from worker.ops.redis_connection import stop_embedded_server


def test_status_renders_for_a_terminal_and_as_json_and_says_never_reached(tmp_path: Path) -> None:
    source = tmp_path / "src"
    make_repo(source, DEFAULT_FILES)
    (tmp_path / "repos.toml").write_text(f'[[repo]]\nname = "payments"\nurl = "{source}"\n')
    env = {
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "CODEBOT_DATA_DIR": str(tmp_path / "data"),
        "CODEBOT_REPOS_FILE": str(tmp_path / "repos.toml"),
        "COLUMNS": "200",
    }
    try:
        terminal = run_codebot("status", env=env)
        as_json = run_codebot("status", "--json", env=env)
    finally:
        stop_embedded_server(load_settings(env_file=None, data_dir=tmp_path / "data"))
    assert terminal.returncode == 0, terminal.stderr
    assert "**" not in terminal.stdout and "`" not in terminal.stdout  # no chat markup
    assert "gpt-5-mini at http://127.0.0.1:9/v1: never reached" in terminal.stdout
    assert "payments: never refreshed" in terminal.stdout
    facts = json.loads(as_json.stdout)
    endpoint = facts["model"]["endpoints"][0]
    assert endpoint["configured"] and endpoint["reached"] is False and endpoint["summary"] == "never reached"
    assert [repo["name"] for repo in facts["repos"]] == ["payments"] and facts["queue"][
        "questions_waiting"
    ] == 0


def test_status_says_an_endpoint_that_answered_but_never_completed_a_reply_and_the_model_it_serves(
    tmp_path: Path,
) -> None:
    source = tmp_path / "src"
    make_repo(source, DEFAULT_FILES)
    (tmp_path / "repos.toml").write_text(f'[[repo]]\nname = "payments"\nurl = "{source}"\n')
    # a one-model server (as llama.cpp's): it lists its own model, whatever name it is asked for,
    # and writes a byte every 2 s, so no reply comes whole before the question's 6 s are up
    with ScriptedModel(lambda _body: trickle(2.0, text("Retries back off. " * 40))) as model:
        env = {
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "k",
            "CODEBOT_QUESTION_DEADLINE_SECONDS": "6",
            "CODEBOT_MODEL_MAX_RETRIES": "0",
            "CODEBOT_DATA_DIR": str(tmp_path / "data"),
            "CODEBOT_REPOS_FILE": str(tmp_path / "repos.toml"),
            "COLUMNS": "300",
        }
        try:
            asked = run_codebot("ask", "how does retry work?", env=env, timeout=120)
            terminal = run_codebot("status", env=env)
            as_json = run_codebot("status", "--json", env=env)
        finally:
            stop_embedded_server(load_settings(env_file=None, data_dir=tmp_path / "data"))
    assert asked.returncode == 4, asked.stdout  # cut off
    assert re.search(r"gpt-5-mini at \S+: answered [1-9]\d*, never completed a reply", terminal.stdout)
    assert "never reached" not in terminal.stdout
    assert "the server reports model scripted-model" in terminal.stdout
    endpoint = json.loads(as_json.stdout)["model"]["endpoints"][0]
    assert (
        endpoint["reached"] is True and endpoint["replies_completed"] == 0 and endpoint["replies_begun"] >= 1
    )
    assert endpoint["model"] == "gpt-5-mini" and endpoint["served_model"] == "scripted-model"
