"""What a question needs before its first model call: the shared facts it reads from Redis, in
one round trip, and the process's model client.

A question's start used to read, one round trip each: whether its final message is already
stored, the commit each of its repos should be at (worker/repos/refresh.py), and what any
worker learned about the model endpoint (worker/agent/endpoint_memory.py). They do not depend
on each other, so one pipeline reads them all; each is then used exactly as its own read was.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

import openai
from redis import Redis
from redis.exceptions import RedisError

from worker.agent.endpoint_memory import ENDPOINT_KEY_PREFIX, endpoint_id
from worker.agent.model import make_openai_client
from worker.jobs.question import Question
from worker.jobs.queue import ANSWERED_KEY_PREFIX
from worker.jobs.runtime import Runtime
from worker.repos.refresh import REPO_KEY_PREFIX


@dataclass(frozen=True)
class StartFacts:
    """What one round trip read at a question's start."""

    answered: bool  # its final message is stored already (an earlier run's)
    # each repo's commit as recorded by any machine (None: none recorded); a repo whose read
    # failed is left out, and catch_up reads it again (and skips it, as before, if Redis fails)
    wanted: dict[str, str | None] = field(default_factory=dict)
    endpoint: dict[bytes, bytes] | None = None  # the endpoint's stored facts; None: not read


def read_start(redis: Redis, runtime: Runtime, question: Question) -> StartFacts:
    """The start's reads in one round trip. Raises the RedisError of the answered check, as
    that check alone did (the job fails and RQ retries it); the others fall back to their own
    reads and their own handling of a failing Redis."""
    names = list(dict.fromkeys(question.repos))
    pipe = redis.pipeline(transaction=False)
    pipe.exists(ANSWERED_KEY_PREFIX + question.id)
    for name in names:
        pipe.hget(REPO_KEY_PREFIX + name, "sha")
    pipe.hgetall(ENDPOINT_KEY_PREFIX + endpoint_id(runtime.settings))
    answered, *shas, endpoint = pipe.execute(raise_on_error=False)
    if isinstance(answered, Exception):
        raise answered
    wanted = {
        name: (sha.decode() if isinstance(sha, bytes) else sha)
        for name, sha in zip(names, shas, strict=True)
        if not isinstance(sha, RedisError)
    }
    return StartFacts(
        answered=bool(answered),
        wanted=wanted,
        endpoint=None if isinstance(endpoint, Exception) else endpoint,
    )


_clients: dict[tuple[int, str | None, str, float], openai.OpenAI] = {}
_clients_lock = threading.Lock()


def make_model_client(runtime: Runtime) -> openai.OpenAI:
    """The process's client for the configured endpoint: one per process (its connection pool
    serves every question a threaded worker holds), never shared across a fork (keyed by pid:
    docs/platform-notes.md, pitfall 15). The agent retries itself, within the question's
    deadline (worker/agent/model.py)."""
    settings = runtime.settings
    key_text = settings.openai_api_key.get_secret_value() if settings.openai_api_key else ""
    key = (os.getpid(), settings.openai_base_url, key_text, float(settings.model_timeout_seconds))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = make_openai_client(settings)
        return client
