"""What the workers learned of each model endpoint, said for `codebot status` and `/codebot status`.

Read from the endpoint facts kept in Redis (worker/agent/endpoint_memory.py): whether a request
of codebot's was ever answered there and whether a reply ever came whole, what the endpoint
refused or ignores, its window, speeds and kind, and the model the server says it serves when
that is not the one configured.
"""

from __future__ import annotations

from redis import Redis

from worker.agent.concurrency import concurrency_text
from worker.agent.endpoint_memory import ENDPOINT_KEY_PREFIX, FEATURE_LABELS, speed_text

NEVER_REACHED = "never reached"


def known_endpoints(redis: Redis) -> list[dict[str, str]]:
    """Every endpoint with facts in Redis, for `codebot status`."""
    found: list[dict[str, str]] = []
    for key in sorted(redis.scan_iter(match=ENDPOINT_KEY_PREFIX + "*", count=100)):
        raw: dict[bytes, bytes] = redis.hgetall(key)
        found.append({k.decode(): v.decode("utf-8", "replace") for k, v in raw.items()})
    return found


def served_model(facts: dict[str, str]) -> str | None:
    """The model the server names, when it is not the configured one."""
    served = facts.get("served_model", "")
    return served if served and served != facts.get("model") else None


def reached_text(facts: dict[str, str]) -> str:
    """Whether codebot's requests got anywhere: a reply began, and one came whole."""
    if any(k.startswith("ok:") for k in facts):
        # "accepted" only once a reply came whole: a reply cut off proved nothing
        return "every optional field accepted"
    begun = facts.get("replies_begun", "0")
    if begun.isdigit() and int(begun) > 0:
        return f"answered {int(begun)}, never completed a reply"
    return NEVER_REACHED


def describe_endpoint(facts: dict[str, str]) -> str:
    """One line: whether the endpoint was reached, what it refused or ignores, its window and speed."""
    refused = [FEATURE_LABELS.get(k.removeprefix("refused:"), k) for k in facts if k.startswith("refused:")]
    ignored = [FEATURE_LABELS.get(k.removeprefix("ignored:"), k) for k in facts if k.startswith("ignored:")]
    parts = []
    if refused:
        parts.append(f"no {', no '.join(refused)}")
    if ignored:
        parts.append(f"ignores {', '.join(ignored)}")
    if not refused and not ignored:
        parts.append(reached_text(facts))
    tokens = facts.get("context_tokens", "0")
    source = facts.get("context_source", "")
    if tokens.isdigit() and int(tokens) > 0:
        parts.append(f"context {int(tokens):,} tokens ({source})")
    speed = speed_text(_float(facts.get("prompt_tps", "")), _float(facts.get("generation_tps", "")))
    if speed:
        parts.append(speed)
    if facts.get("server_kind"):
        parts.append(f"server: {facts['server_kind']}")
    if served_model(facts):
        parts.append(f"the server reports model {served_model(facts)}")
    concurrency = facts.get("concurrency", "")
    if concurrency.isdigit() and int(concurrency) > 0:
        parts.append(concurrency_text(int(concurrency)))
    return "; ".join(parts)


def _float(text: str) -> float:
    try:
        return max(float(text), 0.0)
    except ValueError:
        return 0.0
