"""An end-to-end rig: a real git repo, its synced snapshot, embedded Redis, RQ, the scripted model.

`Rig.ask(text)` goes through the same path as `codebot ask`: enqueue on RQ, a real burst
worker runs the job, and the console sink's events are read back from Redis.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis import Redis
from rq import Queue, SimpleWorker

from codebot.wiring import build_runtime
from config.settings import Settings, load_settings
from tests.support.fixture_repos import make_repo
from tests.support.model_server import ScriptedModel
from worker.jobs import runtime as runtime_module
from worker.jobs.question import Question, ReplyTarget, Turn, event_identity
from worker.jobs.queue import QUESTIONS_QUEUE, Enqueued, enqueue_question
from worker.jobs.runtime import Runtime
from worker.jobs.sink import read_console_events
from worker.ops.redis_connection import connect, stop_embedded_server

DEFAULT_FILES = {
    "README.md": "# payments\n\nA tiny payments service used in codebot's tests.\n",
    "payments/retry.py": (
        "import time\n"
        "\n"
        "MAX_ATTEMPTS = 5\n"
        "\n"
        "\n"
        "def retry(call, attempts=MAX_ATTEMPTS, backoff=0.5):\n"
        '    """Call `call` until it succeeds, sleeping longer after each failure."""\n'
        "    for attempt in range(attempts):\n"
        "        try:\n"
        "            return call()\n"
        "        except ConnectionError:\n"
        "            time.sleep(backoff * 2**attempt)\n"
        "    raise RuntimeError('gave up')\n"
    ),
    "payments/settings.py": 'AWS_ACCESS_KEY_ID = "AKIAQWERTYUIOPASDFGHJ"\nREGION = "eu-west-1"\n',
    ".env": "STRIPE_KEY=sk_live_51HplantedSecretValue000000000\n",
}


@dataclass
class Rig:
    settings: Settings
    runtime: Runtime
    redis: Redis
    model: ScriptedModel
    sha: str
    repo: str = "payments"
    answers: list[dict[str, Any]] = field(default_factory=list)

    def question(
        self, text: str, history: list[Turn] | None = None, repos: list[str] | None = None
    ) -> Question:
        return Question(
            id=event_identity("console", uuid.uuid4().hex),
            asker="tester",
            target=ReplyTarget(platform="console", channel="console"),
            text=text,
            repos=repos or [self.repo],
            history=history or [],
        )

    def enqueue(self, question: Question) -> Enqueued:
        return enqueue_question(self.redis, question, self.settings)

    def work(self) -> None:
        SimpleWorker([Queue(QUESTIONS_QUEUE, connection=self.redis)], connection=self.redis).work(
            burst=True, logging_level="WARNING"
        )

    def events(self, question: Question, timeout: float = 5.0) -> list[tuple[str, dict[str, Any]]]:
        return list(read_console_events(self.redis, question.id, timeout, poll_ms=100))

    def ask(self, text: str, **kwargs: Any) -> tuple[Question, list[tuple[str, dict[str, Any]]]]:
        question = self.question(text, **kwargs)
        self.enqueue(question)
        self.work()
        return question, self.events(question)

    def final(self, events: list[tuple[str, dict[str, Any]]]) -> tuple[str, dict[str, Any]]:
        finals = [e for e in events if e[0] in ("answer", "failed")]
        assert len(finals) == 1, f"expected exactly one answer or failure, got {events}"
        return finals[0]


def build_rig(
    tmp: Path,
    files: dict[str, str] | None = None,
    model_options: dict[str, Any] | None = None,
    **overrides: Any,
) -> Iterator[Rig]:
    """`model_options` go to the ScriptedModel (strict modes, a context window, metadata)."""
    model = ScriptedModel(**(model_options or {}))
    source = tmp / "payments-src"
    sha = make_repo(source, files if files is not None else DEFAULT_FILES)
    repos_file = tmp / "repos.toml"
    repos_file.write_text(
        "[[repo]]\n"
        'name = "payments"\n'
        f'url = "{source}"\n'
        'web_url = "https://github.com/acme/payments"\n'
        'description = "the payments service"\n',
        encoding="utf-8",
    )
    options: dict[str, Any] = {
        "data_dir": tmp / "data",
        "repos_file": repos_file,
        "openai_base_url": model.base_url,
        "openai_api_key": "test-key",
        "model_max_retries": 0,
        "model_timeout_seconds": 10.0,
    }
    options.update(overrides)
    settings = load_settings(env_file=None, **options)
    runtime = build_runtime(settings)
    result = runtime.mirrors.sync("payments")
    assert result.ok, result.error
    runtime_module.install(runtime)
    redis = connect(settings)
    try:
        yield Rig(settings=settings, runtime=runtime, redis=redis, model=model, sha=sha)
    finally:
        model.close()
        stop_embedded_server(settings)
