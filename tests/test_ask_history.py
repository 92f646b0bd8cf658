"""`codebot ask` about this repo's own history, end to end, as a user runs it from a fresh clone: the
default whitelist (this checkout, mirrored with its history), the scripted model calling log, blame
and show, and the commit cited in the answer verified. Expectations come from `git log` at test
time: this repo's history is whatever the checkout holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config.settings import load_settings
from tests.support import this_repo
from tests.support.golden_policy import GoldenPolicy
from tests.support.model_server import ScriptedModel
from tests.test_cli_ask_and_tool import codebot
from worker.jobs.evaluate import GoldenQuestion
from worker.ops.redis_connection import stop_embedded_server

QUESTION = "who last changed how citations are verified, and why?"
CITATIONS = "worker/agent/citations.py"

pytestmark = pytest.mark.skipif(not this_repo.head(), reason="needs this repo's git history")


def test_codebot_ask_who_last_changed_how_citations_are_verified_cites_that_commit_verified(
    tmp_path: Path,
) -> None:
    expected = this_repo.git_here("log", "-1", "--follow", "--format=%H", "HEAD", "--", CITATIONS)
    golden = GoldenQuestion(question=QUESTION, repo="codebot", expected_commits=[f"last:{CITATIONS}"])
    env = {
        "CODEBOT_DATA_DIR": str(tmp_path / "data"),
        "CODEBOT_MODEL_MAX_RETRIES": "0",
        "OPENAI_API_KEY": "k",
    }
    if this_repo.current_branch() is None:  # a detached checkout: a bare copy with a branch stands in
        env["CODEBOT_REPOS_FILE"] = str(this_repo.repos_file(tmp_path))
    try:
        with ScriptedModel(GoldenPolicy([golden])) as model:
            result = codebot({**env, "OPENAI_BASE_URL": model.base_url}, "ask", QUESTION)
            calls = [
                (call["function"]["name"], json.loads(call["function"]["arguments"]))
                for message in model.requests[-1]["messages"]
                if message["role"] == "assistant"
                for call in message.get("tool_calls") or []
            ]
    finally:
        stop_embedded_server(load_settings(env_file=None, data_dir=tmp_path / "data"))

    assert result.returncode == 0, result.stderr
    assert [name for name, _ in calls] == ["log", "blame", "show"]
    assert calls[2][1]["sha"] == expected[:10]  # the newest commit log listed for the file
    assert f"reading the history of `{CITATIONS}` in codebot" in result.stdout
    assert f"reading commit `{expected[:10]}` in codebot" in result.stdout
    assert f"codebot@{expected[:7]}" in result.stdout and "Sources" in result.stdout
    assert "could not be verified" not in result.stdout and "unverified" not in result.stdout
