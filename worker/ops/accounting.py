"""Token and cost accounting per question, per user and per day, and the optional daily budget.

Usage is kept in Redis hashes per UTC day (`codebot:usage:<day>:…`) for USAGE_TTL_SECONDS.
When `daily_token_budget` is set and today's total reaches it, adapters answer politely
instead of enqueueing, and a worker refuses questions it takes after the budget was spent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from redis import Redis
from redis.client import Pipeline

from config.settings import Settings

USAGE_KEY_PREFIX = "codebot:usage:"
USAGE_TTL_SECONDS = 40 * 24 * 3600
MICRO = 1_000_000
BUDGET_SPENT_MESSAGE = (
    "Sorry, today's question budget is used up. Please ask again tomorrow (UTC), or ask an admin to raise it."
)


@dataclass(frozen=True)
class Usage:
    questions: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def today(now: float | None = None) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(now if now is not None else time.time()))


def cost_usd(settings: Settings, prompt_tokens: int, completion_tokens: int) -> float:
    return (
        prompt_tokens * settings.model_input_usd_per_million_tokens
        + completion_tokens * settings.model_output_usd_per_million_tokens
    ) / MICRO


def record_usage(
    redis: Redis,
    settings: Settings,
    user_key: str,
    prompt_tokens: int,
    completion_tokens: int,
    day: str | None = None,
    into: Pipeline | None = None,
) -> None:
    """Add one question's tokens to the user's and the day's totals (queued `into` a caller's
    pipeline when given: its caller sends it)."""
    day = day or today()
    micros = round(cost_usd(settings, prompt_tokens, completion_tokens) * MICRO)
    pipe = into if into is not None else redis.pipeline()
    for key in (f"{USAGE_KEY_PREFIX}{day}:total", f"{USAGE_KEY_PREFIX}{day}:user:{user_key}"):
        pipe.hincrby(key, "questions", 1)
        pipe.hincrby(key, "prompt_tokens", prompt_tokens)
        pipe.hincrby(key, "completion_tokens", completion_tokens)
        pipe.hincrby(key, "cost_usd_micros", micros)
        pipe.expire(key, USAGE_TTL_SECONDS)
    if into is None:
        pipe.execute()


def _usage(raw: dict[bytes, bytes]) -> Usage:
    def number(name: str) -> int:
        return int(raw.get(name.encode(), b"0"))

    return Usage(
        questions=number("questions"),
        prompt_tokens=number("prompt_tokens"),
        completion_tokens=number("completion_tokens"),
        cost_usd=number("cost_usd_micros") / MICRO,
    )


def usage_of_day(redis: Redis, day: str | None = None) -> Usage:
    return _usage(redis.hgetall(f"{USAGE_KEY_PREFIX}{day or today()}:total"))


def usage_of_user(redis: Redis, user_key: str, day: str | None = None) -> Usage:
    return _usage(redis.hgetall(f"{USAGE_KEY_PREFIX}{day or today()}:user:{user_key}"))


def budget_spent(redis: Redis, settings: Settings) -> bool:
    """True when a daily token budget is set and today's usage has reached it."""
    if not settings.daily_token_budget:
        return False
    return usage_of_day(redis).tokens >= settings.daily_token_budget
