"""Asking a model server how large its context window is, where it can say.

Tried in order, all within `model_discovery_timeout_seconds`; the first answer wins:

1. `GET {base}/models`, the entry of our model: `max_model_len` (vLLM), `context_length`
   (OpenRouter).
2. `GET {root}/api/v0/models`: LM Studio, `loaded_context_length` (else `max_context_length`).
3. `GET {root}/props`: llama.cpp's llama-server, `default_generation_settings.n_ctx`.
4. Ollama: `GET {root}/api/ps` (a loaded model's real `context_length`), then
   `POST {root}/api/show`: `num_ctx` in its parameters (a Modelfile setting), else the
   model's trained `*.context_length` capped at Ollama's default window (4,096 tokens on
   small GPUs). Ollama does not show `OLLAMA_CONTEXT_LENGTH`: a server started with a
   larger one is seen as 4,096 until the model is loaded, or set CODEBOT_MODEL_CONTEXT_TOKENS.

OpenAI itself is not asked (its windows are far larger than `context_budget_chars`). A server
that says nothing is remembered as unknown; its "maximum context length" error, if it sends
one, still teaches the window (worker/agent/model_errors.py).

The same GETs tell which kind of server it is (worker/agent/server_kind.py) and, for llama.cpp,
whether its chat template shows tools to the model: `discover()` returns all of it. Every
request here is a GET (or Ollama's read-only `POST /api/show`): nothing that could crash a
server or keep it busy.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2

from config.settings import Settings
from worker.agent.endpoint_memory import OPENAI_BASE_URL, base_url_of
from worker.agent.server_kind import OPENAI, UNKNOWN, identify, tools_shown

log = logging.getLogger("codebot.model")

OLLAMA_DEFAULT_CONTEXT_TOKENS = 4096
UNREACHABLE = "unreachable"  # (0, UNREACHABLE): no answer at all, so nothing to remember
MAX_DISCOVERY_BODY_BYTES = 8_000_000  # OpenRouter's model list is a few MB


@dataclass
class Discovery:
    context: tuple[int, str] | None = None  # (tokens, source); (0, UNREACHABLE) when nothing answered
    kind: str = UNKNOWN
    tools_shown: bool | None = None  # llama.cpp's /props verdict on its chat template
    served_model: str = ""  # the id /v1/models gives the model asked for (a one-model server: its own)
    seen: dict[str, Any] = field(default_factory=dict)  # what the routes answered, for identify()


def discover_context_tokens(settings: Settings) -> tuple[int, str] | None:
    """(tokens, where it came from); None when the server does not say; (0, UNREACHABLE) when
    no request got an answer."""
    return discover(settings).context


def discover(settings: Settings) -> Discovery:
    """The window, the server's kind and what its template shows, from harmless GETs."""
    base = base_url_of(settings)
    if base == OPENAI_BASE_URL:
        return Discovery(kind=OPENAI)
    root = re.sub(r"/v1$", "", base)
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else ""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    deadline = time.monotonic() + settings.model_discovery_timeout_seconds
    answered: list[int] = []
    found = Discovery()
    try:
        with httpx2.Client(headers=headers, follow_redirects=False) as http:
            for window in _probes(http, base, root, settings.model, deadline, answered, found.seen):
                if time.monotonic() > deadline:
                    break
                if window is not None and window[0] > 0 and found.context is None:
                    log.info("model context window: %d tokens (%s)", window[0], window[1])
                    found.context = window
    except (httpx2.HTTPError, OSError, ValueError):
        log.debug("model server discovery failed", exc_info=True)
    if found.context is None and not answered:
        found.context = (0, UNREACHABLE)
    seen = found.seen
    found.kind = identify(seen.get("server", ""), seen.get("models"), seen.get("props"), set(seen))
    found.tools_shown = tools_shown(seen.get("props"))
    found.served_model = seen.get("served_model") or ""
    return found


def _probes(
    http: httpx2.Client,
    base: str,
    root: str,
    model: str,
    deadline: float,
    answered: list[int],
    seen: dict[str, Any],
) -> Iterator[tuple[int, str] | None]:
    """Every route is asked (the kind needs them all); the first window found wins."""

    def get(url: str) -> Any:
        return _json(http, "GET", url, deadline, answered, seen=seen)

    models = seen["models"] = get(f"{base}/models")
    entry = _model_entry(models, model)
    if entry is not None:
        seen["served_model"] = entry.get("id") if isinstance(entry.get("id"), str) else ""
        for key, source in (
            ("max_model_len", "the server's /v1/models max_model_len (vLLM)"),
            ("loaded_context_length", "the server's model list, loaded_context_length"),
            ("context_length", "the server's model list, context_length"),
            ("max_context_length", "the server's model list, max_context_length"),
        ):
            yield _int_from(entry.get(key), source)
    props = seen["props"] = get(f"{root}/props")
    if isinstance(props, dict):
        settings = props.get("default_generation_settings")
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else props.get("n_ctx")
        yield _int_from(n_ctx, "llama-server /props n_ctx")
        return  # llama.cpp: the other servers' routes are not its own
    lmstudio_models = get(f"{root}/api/v0/models")
    if lmstudio_models is not None:
        seen["lmstudio"] = True
    lmstudio = _model_entry(lmstudio_models, model)
    if lmstudio is not None:
        yield _int_from(
            lmstudio.get("loaded_context_length"), "LM Studio /api/v0/models loaded_context_length"
        )
        yield _int_from(lmstudio.get("max_context_length"), "LM Studio /api/v0/models max_context_length")
    ps = get(f"{root}/api/ps")
    if isinstance(ps, dict) and "models" in ps:
        seen["ollama"] = True
    loaded = _model_entry({"data": ps.get("models")} if isinstance(ps, dict) else None, model)
    if loaded is not None:
        yield _int_from(loaded.get("context_length"), "Ollama /api/ps (the loaded model)")
    show = _json(http, "POST", f"{root}/api/show", deadline, answered, {"model": model})
    if isinstance(show, dict):
        yield _ollama_show(show)


def _json(
    http: httpx2.Client,
    method: str,
    url: str,
    deadline: float,
    answered: list[int],
    body: dict[str, Any] | None = None,
    seen: dict[str, Any] | None = None,
) -> Any:
    left = deadline - time.monotonic()
    if left <= 0:
        return None
    try:
        response = http.request(method, url, json=body, timeout=left)
    except httpx2.HTTPError:
        return None
    answered.append(response.status_code)
    if seen is not None and response.headers.get("server"):
        seen.setdefault("server", response.headers["server"])
    if response.status_code != 200 or len(response.content) > MAX_DISCOVERY_BODY_BYTES:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _model_entry(listing: Any, model: str) -> dict[str, Any] | None:
    entries = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, dict) and model in (entry.get("id"), entry.get("name"), entry.get("model")):
            return entry
    # Ollama accepts "qwen2.5-coder" for "qwen2.5-coder:latest"
    for entry in entries:
        if isinstance(entry, dict) and f"{model}:latest" in (entry.get("id"), entry.get("name")):
            return entry
    # a server of one model (vLLM, llama.cpp) answers with it whatever name it is asked for
    if len(entries) == 1 and isinstance(entries[0], dict):
        return entries[0]
    return None


def _int_from(value: Any, source: str) -> tuple[int, str] | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return int(value), source
    if isinstance(value, str) and value.strip().isdigit():
        return int(value), source
    return None


def _ollama_show(show: dict[str, Any]) -> tuple[int, str] | None:
    parameters = show.get("parameters")
    if isinstance(parameters, str):
        match = re.search(r"^\s*num_ctx\s+(\d+)", parameters, re.MULTILINE)
        if match:
            return int(match.group(1)), "Ollama /api/show num_ctx"
    info = show.get("model_info")
    if isinstance(info, dict):
        trained = [v for k, v in info.items() if k.endswith(".context_length") and isinstance(v, int)]
        if trained:
            return (
                min(trained[0], OLLAMA_DEFAULT_CONTEXT_TOKENS),
                "Ollama's default window (OLLAMA_CONTEXT_LENGTH is not visible; set CODEBOT_MODEL_CONTEXT_TOKENS)",
            )
    return None
