"""`codebot status` in a terminal: drawn by Rich without chat markup, `--json` for scripts, and an
endpoint no question ever reached is said to be "never reached" (not "every field accepted")."""

from __future__ import annotations

import json
from pathlib import Path

from config.settings import load_settings
from tests.support.cli import run_codebot
from tests.support.e2e import DEFAULT_FILES
from tests.support.fixture_repos import make_repo
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
