"""Thread memory: the earlier questions and answers of a chat thread, kept in Redis.

A thread's turns are the context of the next question asked in it (they survive process
restarts). Which threads are conversations with the bot is the intake's thread memory
(bot/intake.py).
"""

from __future__ import annotations

from redis import Redis
from redis.client import Pipeline

from worker.jobs.question import ReplyTarget, Turn

THREAD_KEY_PREFIX = "codebot:thread:"
THREAD_TTL_SECONDS = 30 * 24 * 3600
THREAD_MAX_TURNS = 20
ANSWER_CHARS_KEPT = 6000  # enough context for a follow-up, bounded memory per thread


def thread_key(platform: str, channel: str, thread: str) -> str:
    return f"{THREAD_KEY_PREFIX}{platform}:{channel}:{thread}"


def record_turn(redis: Redis, target: ReplyTarget, turn: Turn, into: Pipeline | None = None) -> None:
    """Keep `turn` as the thread's latest; `into`: queued on that pipeline, which the caller runs."""
    if not target.thread:
        return
    key = thread_key(target.platform, target.channel, target.thread)
    kept = Turn(question=turn.question, answer=turn.answer[:ANSWER_CHARS_KEPT])
    pipe = redis.pipeline() if into is None else into
    pipe.rpush(key, kept.model_dump_json())
    pipe.ltrim(key, -THREAD_MAX_TURNS, -1)
    pipe.expire(key, THREAD_TTL_SECONDS)
    if into is None:
        pipe.execute()


def load_turns(redis: Redis, platform: str, channel: str, thread: str) -> list[Turn]:
    raw = redis.lrange(thread_key(platform, channel, thread), 0, -1)
    return [Turn.model_validate_json(item) for item in raw]
