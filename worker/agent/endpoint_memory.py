"""What each model endpoint accepts, learned once and remembered: in this process and in Redis.

An endpoint is a base URL and a model name. What it refused (an optional request field such
as `tool_choice="required"`, streaming, ...), what it was seen to accept, and its context
window are kept in this process (so later questions here skip the failed attempt) and in
Redis under `codebot:model:endpoint:<hash>` (so every worker, including the next forked work
horse, learns it once). Facts expire after `model_memory_seconds`, so an upgraded server is
tried again. Redis is optional: `codebot tool`, eval and tests may run without it, and a Redis
error never fails a question.

The last model errors (the server's own text, trimmed and redacted) are kept in Redis too, for
`codebot status`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from redis import Redis
from redis.exceptions import RedisError

from config.settings import Settings
from worker.agent.concurrency import concurrency_text
from worker.history.events import append_event
from worker.ops.json_list import json_objects

log = logging.getLogger("codebot.model")

ENDPOINT_KEY_PREFIX = "codebot:model:endpoint:"
MODEL_ERRORS_KEY = "codebot:model:errors"
MODEL_ERRORS_KEPT = 20
OPENAI_BASE_URL = "https://api.openai.com/v1"

# Optional request features an endpoint may refuse (the names are stored in Redis).
TOOL_CHOICE_REQUIRED = "tool_choice_required"
TOOL_CHOICE_AUTO = "tool_choice_auto"  # vLLM without --enable-auto-tool-choice
TOOL_CHOICE_NONE = "tool_choice_none"  # the forced answer's shape: tools listed, none to call
PARALLEL_TOOL_CALLS = "parallel_tool_calls"
STREAM = "stream"
STREAM_OPTIONS = "stream_options"
EMPTY_CONTENT = "empty_content"  # an assistant tool-call turn with content ""
ABSENT_CONTENT = "absent_content"  # ... with no content field at all
MAX_TOKENS = "max_tokens"  # the reply's bound, as `max_tokens` (local servers)
MAX_COMPLETION_TOKENS = "max_completion_tokens"  # ... as OpenAI's newer name (reasoning models)
# Not a request field: the server accepts `tools` but its chat template never shows them to the model.
TOOLS = "tools"
# Where that verdict came from: llama.cpp's /props (its template's caps), or `usage` counting
# fewer prompt tokens than the tool schemas alone (never once a listed tool was called there).
TOOLS_UNSEEN_FROM_PROPS = "props"
TOOLS_UNSEEN_FROM_USAGE = "usage"

FEATURE_LABELS = {
    TOOL_CHOICE_REQUIRED: 'tool_choice="required"',
    TOOL_CHOICE_AUTO: 'tool_choice="auto"',
    TOOL_CHOICE_NONE: 'tool_choice="none" (the final answer folds tool results into text)',
    PARALLEL_TOOL_CALLS: "parallel_tool_calls",
    STREAM: "streaming",
    STREAM_OPTIONS: "stream_options",
    EMPTY_CONTENT: "empty content in tool-call turns",
    ABSENT_CONTENT: "tool-call turns without content",
    MAX_TOKENS: "max_tokens",
    MAX_COMPLETION_TOKENS: "max_completion_tokens",
    TOOLS: "tools (the model never sees them)",
}
MODEL_NAME_MAX_CHARS = 100
SPEED_WEIGHT = 0.5  # a new measurement's weight against what was known (speeds drift with load)


def base_url_of(settings: Settings) -> str:
    return (settings.openai_base_url or OPENAI_BASE_URL).rstrip("/")


def display_url(url: str) -> str:
    """A base URL safe to show: no user, password or query string."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")) if netloc else url.split("?")[0]


def display_host(url: str) -> str:
    """A base URL's host and port, as apologies name the endpoint."""
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname or "?"


def endpoint_id(settings: Settings) -> str:
    key = f"{base_url_of(settings)}\n{settings.model}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass
class EndpointFacts:
    refused: dict[str, str] = field(default_factory=dict)  # feature -> why (the server's words)
    confirmed: set[str] = field(default_factory=set)  # features a request succeeded with
    context_tokens: int = 0  # 0: unknown
    context_source: str = ""  # where the window came from; "none" when discovery found nothing
    updated_at: float = 0.0
    ignored: dict[str, str] = field(default_factory=dict)  # features accepted but not honoured
    server_kind: str = ""  # worker/agent/server_kind.py; "" until discovery ran
    prompt_tps: float = 0.0  # measured prompt reading speed, tokens/s (0: not measured)
    generation_tps: float = 0.0  # measured generation speed, tokens/s
    busy_until: float = 0.0  # wall clock: an abandoned request may still run on the server until then
    concurrency: int = 0  # requests observed served at once: 0 unknown, 1 one at a time (concurrency.py)
    tools_unseen_from: str = ""  # TOOLS_UNSEEN_FROM_*, when TOOLS is ignored
    # replies the server began (headers came) before any was whole, and whole ones: counted only
    # until the first whole one, so `codebot status` can say "answered 2, never completed a reply"
    replies_begun: int = 0
    replies_completed: int = 0
    served_model: str = ""  # the model the server says it serves (its replies' `model`, /v1/models)


# In this process, by endpoint id: a later question here does not repeat a refused attempt.
_PROCESS_FACTS: dict[str, EndpointFacts] = {}
_PROCESS_LOCK = threading.Lock()


class EndpointMemory:
    """The facts of one endpoint, read once per question and written through on every change."""

    def __init__(
        self, settings: Settings, redis: Redis | None = None, stored: dict[bytes, bytes] | None = None
    ) -> None:
        """`stored`: this endpoint's hash as the caller just read it from Redis (a question's
        start reads it with its other facts in one round trip), instead of reading it here."""
        self.settings = settings
        self.redis = redis
        self.id = endpoint_id(settings)
        self.key = ENDPOINT_KEY_PREFIX + self.id
        self.ttl = settings.model_memory_seconds
        with _PROCESS_LOCK:
            known = _PROCESS_FACTS.get(self.id)
        if known is None or time.time() - known.updated_at >= self.ttl:
            known = EndpointFacts(updated_at=time.time())
        # What another worker learned meanwhile is in Redis: one HGETALL per question.
        self.facts = self._merge(known, self._load(stored))
        with _PROCESS_LOCK:
            _PROCESS_FACTS[self.id] = self.facts

    # --- reading -------------------------------------------------------------------------------
    def refuses(self, feature: str) -> bool:
        return feature in self.facts.refused

    def confirmed(self, feature: str) -> bool:
        return feature in self.facts.confirmed

    def ignores(self, feature: str) -> bool:
        return feature in self.facts.ignored

    def context(self) -> tuple[int, str] | None:
        """(tokens, source) when the window is known; (0, "none") when discovery found nothing."""
        if not self.facts.context_source:
            return None
        return self.facts.context_tokens, self.facts.context_source

    # --- learning ------------------------------------------------------------------------------
    def refuse(self, feature: str, why: str) -> None:
        if feature in self.facts.refused:
            return
        self.facts.refused[feature] = why[:300]
        self.facts.confirmed.discard(feature)
        log.warning(
            "model endpoint %s (model %s) refused %s; not sending it from now on: %s",
            display_url(base_url_of(self.settings)),
            self.settings.model,
            FEATURE_LABELS.get(feature, feature),
            why[:300] or "(no error text)",
        )
        self._save({f"refused:{feature}": why[:300]})

    def confirm(self, features: set[str]) -> None:
        new = features - self.facts.confirmed - set(self.facts.refused)
        if not new:
            return
        self.facts.confirmed |= new
        self._save({f"ok:{feature}": "1" for feature in new})

    def ignore(self, feature: str, why: str) -> None:
        """Accepted without an error, but not honoured (learned from an ordinary answer)."""
        if feature in self.facts.ignored:
            return
        self.facts.ignored[feature] = why[:300]
        self.facts.confirmed.discard(feature)
        log.warning(
            "model endpoint %s (model %s) ignores %s: %s",
            display_url(base_url_of(self.settings)),
            self.settings.model,
            FEATURE_LABELS.get(feature, feature),
            why[:300],
        )
        self._save({f"ignored:{feature}": why[:300]})

    def ignore_tools(self, source: str, why: str) -> None:
        """The model never sees the tools, as `source` (TOOLS_UNSEEN_FROM_*) shows."""
        if TOOLS in self.facts.ignored:
            return
        self.facts.tools_unseen_from = source
        self._save({"tools_unseen_from": source})
        self.ignore(TOOLS, why)

    def remember_kind(self, kind: str) -> None:
        self.facts.server_kind = kind
        self._save({"server_kind": kind})

    def remember_speed(self, prompt_tps: float | None, generation_tps: float | None) -> None:
        """Blend a measurement into what was known; either speed may be missing."""

        def blend(old: float, new: float | None) -> float:
            if not new or new <= 0:
                return old
            return new if old <= 0 else old * (1 - SPEED_WEIGHT) + new * SPEED_WEIGHT

        if not (prompt_tps and prompt_tps > 0) and not (generation_tps and generation_tps > 0):
            return  # nothing measured (a short or instant reply): nothing to write
        self.facts.prompt_tps = blend(self.facts.prompt_tps, prompt_tps)
        self.facts.generation_tps = blend(self.facts.generation_tps, generation_tps)
        self._save(
            {
                "prompt_tps": f"{self.facts.prompt_tps:.2f}",
                "generation_tps": f"{self.facts.generation_tps:.2f}",
                "reached_at": f"{time.time():.0f}",
            }
        )

    def remember_busy_until(self, wall_time: float) -> None:
        self.facts.busy_until = max(self.facts.busy_until, wall_time)
        self._save({"busy_until": f"{self.facts.busy_until:.1f}"})

    def remember_concurrency(self, observed: int) -> None:
        """What one answer showed (worker/agent/concurrency.py): served in parallel wins over one
        at a time, which wins over unknown; the highest parallel count seen is kept."""
        if observed <= self.facts.concurrency:
            return
        before, self.facts.concurrency = self.facts.concurrency, observed
        if before <= 1:  # a change of verdict, not a higher count
            log.warning(
                "model endpoint %s (model %s) %s",
                display_url(base_url_of(self.settings)),
                self.settings.model,
                concurrency_text(observed),
            )
        self._save({"concurrency": str(observed)})

    def count_reply(self, completed: bool) -> None:
        """A reply the server began; `completed`: it came whole. Written only until one did."""
        if self.facts.replies_completed:
            return
        self.facts.replies_begun += 1
        self.facts.replies_completed += int(completed)
        self._count({"replies_begun": 1, "replies_completed": int(completed)})

    def remember_served_model(self, name: str) -> None:
        """The model the server names (hostile text: kept to a model name's characters)."""
        shown = re.sub(r"[^\w.:/@+-]", "", name)[:MODEL_NAME_MAX_CHARS]
        if shown and shown != self.facts.served_model:
            self.facts.served_model = shown
            self._save({"served_model": shown})

    def remember_context(self, tokens: int, source: str) -> None:
        self.facts.context_tokens = tokens
        self.facts.context_source = source
        self._save({"context_tokens": str(tokens), "context_source": source})

    # --- storage -------------------------------------------------------------------------------
    def _load(self, stored: dict[bytes, bytes] | None) -> EndpointFacts | None:
        if self.redis is None:
            return None
        try:
            raw: dict[bytes, bytes] = self.redis.hgetall(self.key) if stored is None else stored
        except RedisError:
            return None
        facts = EndpointFacts()
        for key_bytes, value_bytes in raw.items():
            key, value = key_bytes.decode(), value_bytes.decode("utf-8", "replace")
            if key.startswith("refused:"):
                facts.refused[key.removeprefix("refused:")] = value
            elif key.startswith("ok:"):
                facts.confirmed.add(key.removeprefix("ok:"))
            elif key.startswith("ignored:"):
                facts.ignored[key.removeprefix("ignored:")] = value
            elif key in ("replies_begun", "replies_completed") and value.isdigit():
                setattr(facts, key, int(value))
            elif key in ("server_kind", "tools_unseen_from", "served_model"):
                setattr(facts, key, value)
            elif key in ("prompt_tps", "generation_tps", "busy_until"):
                setattr(facts, key, _float(value))
            elif key == "concurrency" and value.isdigit():
                facts.concurrency = int(value)
            elif key == "context_tokens" and value.isdigit():
                facts.context_tokens = int(value)
            elif key == "context_source":
                facts.context_source = value
        return facts

    @staticmethod
    def _merge(mine: EndpointFacts, stored: EndpointFacts | None) -> EndpointFacts:
        if stored is None:
            return mine
        refused = {**mine.refused, **stored.refused}
        merged = EndpointFacts(
            refused=refused,
            confirmed=(mine.confirmed | stored.confirmed) - set(refused),
            context_tokens=stored.context_tokens if stored.context_source else mine.context_tokens,
            context_source=stored.context_source or mine.context_source,
            updated_at=mine.updated_at,
            ignored={**mine.ignored, **stored.ignored},
            server_kind=stored.server_kind or mine.server_kind,
            prompt_tps=stored.prompt_tps or mine.prompt_tps,
            generation_tps=stored.generation_tps or mine.generation_tps,
            busy_until=max(stored.busy_until, mine.busy_until),
            concurrency=max(stored.concurrency, mine.concurrency),
            tools_unseen_from=stored.tools_unseen_from or mine.tools_unseen_from,
            replies_begun=max(stored.replies_begun, mine.replies_begun),
            replies_completed=max(stored.replies_completed, mine.replies_completed),
            served_model=stored.served_model or mine.served_model,
        )
        return merged

    def _count(self, increments: dict[str, int]) -> None:
        if self.redis is None:
            return
        try:
            pipe = self.redis.pipeline()
            for name, by in increments.items():
                pipe.hincrby(self.key, name, by)
            pipe.expire(self.key, int(self.ttl))
            pipe.execute()
        except RedisError:
            log.debug("could not count a model endpoint's reply in Redis", exc_info=True)

    def _save(self, fields: dict[str, str]) -> None:
        self.facts.updated_at = time.time()
        with _PROCESS_LOCK:
            _PROCESS_FACTS[self.id] = self.facts
        if self.redis is None:
            return
        fields = {"base_url": display_url(base_url_of(self.settings)), "model": self.settings.model, **fields}
        try:
            pipe = self.redis.pipeline()
            pipe.hset(self.key, mapping=fields)  # type: ignore[arg-type]
            pipe.expire(self.key, int(self.ttl))
            pipe.execute()
        except RedisError:
            log.debug("could not remember a model endpoint fact in Redis", exc_info=True)


def _float(text: str) -> float:
    try:
        return max(float(text), 0.0)
    except ValueError:
        return 0.0


def forget_in_process() -> None:
    """Drop what this process learned (Redis keeps its copy): for tests and `codebot` restarts."""
    with _PROCESS_LOCK:
        _PROCESS_FACTS.clear()


def speed_text(prompt_tps: float, generation_tps: float) -> str:
    """The measured speeds, as the apology and `codebot status` say them."""
    said = []
    if prompt_tps > 0:
        said.append(f"reads {prompt_tps:,.0f} tokens/s")
    if generation_tps > 0:
        said.append(f"writes {generation_tps:,.1f} tokens/s")
    return "measured: " + ", ".join(said) if said else ""


# --- the last model errors, for admins ------------------------------------------------------------


def record_model_error(redis: Redis | None, entry: dict[str, Any]) -> None:
    """Keep one model error (already trimmed and redacted) among the last MODEL_ERRORS_KEPT."""
    if redis is None:
        return
    try:
        pipe = redis.pipeline()
        pipe.lpush(MODEL_ERRORS_KEY, json.dumps({"at": round(time.time(), 3), **entry}))
        pipe.ltrim(MODEL_ERRORS_KEY, 0, MODEL_ERRORS_KEPT - 1)
        append_event(redis, "model", {"kind": "error", **entry}, into=pipe)
        pipe.execute()
    except RedisError:
        log.debug("could not record a model error in Redis", exc_info=True)


def recent_model_errors(redis: Redis, count: int) -> list[dict[str, Any]]:
    """The newest first."""
    return json_objects(redis, MODEL_ERRORS_KEY, count)
