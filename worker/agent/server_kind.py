"""Which model server an endpoint is, told from harmless GETs, and what that kind is known to do.

codebot never sends a request only to see whether the server survives it: llama-cpp-python
answers `tool_choice="required"` with an HTTP 500 from a crash inside its request handler, and
keeps generating a reply nobody waits for. What a kind is known to refuse is therefore set
before the first question (remembered like a refusal, with the reason), and whether it stops
working on a request whose client went away decides whether a retry may be sent at once.

Told apart by what discovery (worker/agent/discovery.py) already fetches:
- llama.cpp's `llama-server` (also embedded by the `xllamacpp` wheel): a `Server: llama.cpp`
  header, `owned_by: "llamacpp"`, or a `/props` with `build_info`. Its `/props`
  `chat_template_caps.supports_tools` says whether the chat template shows tools to the model.
- llama-cpp-python (`python -m llama_cpp.server`): `owned_by: "me"` in `/v1/models`.
- vLLM: `owned_by: "vllm"`; Ollama: `owned_by: "library"` or an `/api/ps` answer;
  LM Studio: an `/api/v0/models` answer; OpenAI: its own base URL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from worker.agent.endpoint_memory import STREAM, TOOL_CHOICE_REQUIRED

LLAMA_CPP = "llama.cpp"
LLAMA_CPP_PYTHON = "llama-cpp-python"
VLLM = "vllm"
OLLAMA = "ollama"
LM_STUDIO = "lm-studio"
OPENAI = "openai"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class ServerKind:
    name: str
    # Whether the server stops generating when the client disconnects. A server that does not
    # (or one we cannot tell) gets no retry while an abandoned request may still run.
    cancels_on_disconnect: bool
    # Features never sent to it: feature -> why (checked on a real server, docs/models.md).
    known_refusals: dict[str, str] = field(default_factory=dict)


KINDS = {
    LLAMA_CPP: ServerKind(LLAMA_CPP, cancels_on_disconnect=True),
    LLAMA_CPP_PYTHON: ServerKind(
        LLAMA_CPP_PYTHON,
        cancels_on_disconnect=False,
        known_refusals={
            TOOL_CHOICE_REQUIRED: 'llama-cpp-python answers tool_choice="required" with HTTP 500 (known, never sent)',
            STREAM: "llama-cpp-python's streamed reply with tools ends empty (known, never sent)",
        },
    ),
    VLLM: ServerKind(VLLM, cancels_on_disconnect=True),
    OLLAMA: ServerKind(OLLAMA, cancels_on_disconnect=True),
    LM_STUDIO: ServerKind(LM_STUDIO, cancels_on_disconnect=True),
    OPENAI: ServerKind(OPENAI, cancels_on_disconnect=True),
    UNKNOWN: ServerKind(UNKNOWN, cancels_on_disconnect=False),
}


# Servers that run on the team's own machines, often a CPU: their first prompt may take minutes.
LOCAL_KINDS = frozenset({LLAMA_CPP, LLAMA_CPP_PYTHON, OLLAMA, LM_STUDIO})


def kind_of(name: str) -> ServerKind:
    return KINDS.get(name, KINDS[UNKNOWN])


def identify(server_header: str, models: Any, props: Any, answered: set[str]) -> str:
    """The kind, from `/v1/models` (its JSON and Server header), `/props`, and which of the
    other discovery routes answered (`"lmstudio"`, `"ollama"`)."""
    owners = {
        str(entry.get("owned_by", "")).lower()
        for entry in (models.get("data") if isinstance(models, dict) else None) or []
        if isinstance(entry, dict)
    }
    if "llama.cpp" in server_header.lower() or "llamacpp" in owners:
        return LLAMA_CPP
    if isinstance(props, dict) and ("build_info" in props or "default_generation_settings" in props):
        return LLAMA_CPP
    if "me" in owners:
        return LLAMA_CPP_PYTHON
    if "vllm" in owners:
        return VLLM
    if "ollama" in answered or "library" in owners:
        return OLLAMA
    if "lmstudio" in answered:
        return LM_STUDIO
    return UNKNOWN


def tools_shown(props: Any) -> bool | None:
    """llama.cpp's own verdict on its chat template: False when it drops `tools` (None: not said)."""
    caps = props.get("chat_template_caps") if isinstance(props, dict) else None
    if isinstance(caps, str):  # some builds send the caps as a Python-looking string
        lowered = caps.replace(" ", "").lower()
        if "'supports_tools':false" in lowered:
            return False
        return True if "'supports_tools':true" in lowered else None
    if isinstance(caps, dict) and isinstance(caps.get("supports_tools"), bool):
        return bool(caps["supports_tools"])
    return None
