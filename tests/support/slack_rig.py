"""The real Slack adapter on a free port, wired to the fake Web API, embedded Redis and RQ.

    for rig in build_slack_rig(tmp_path):      # (used as a pytest fixture)
        status, _ = rig.mention("how does retry work?")
        rig.settle()                             # every listener bolt started has finished
        rig.work()                               # a real burst worker answers, posting to rig.api

Requests are signed with the signing secret and sent over a socket, as Slack would.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis import Redis
from rq import Queue, SimpleWorker

from bot.slack.app import EVENTS_PATH, SlackHTTPServer, build_app, register
from bot.slack.handlers import SlackDeps
from codebot.wiring import build_runtime
from config.settings import Settings, load_settings
from tests.support.e2e import DEFAULT_FILES
from tests.support.fixture_repos import make_repo
from tests.support.model_server import ScriptedModel
from tests.support.slack_api import SlackAPI, command_body, event_body, mention, signed_post
from worker.jobs import runtime as runtime_module
from worker.jobs.queue import ADMIN_QUEUE, QUESTIONS_QUEUE
from worker.jobs.runtime import Runtime
from worker.ops.redis_connection import connect, stop_embedded_server

SECRET = "test-signing-secret"
SECRET_CHANNEL = "CSECRET"  # the only channel allowed to see the `internal` repo


class TrackingExecutor(ThreadPoolExecutor):
    """A thread pool that can wait until every task submitted so far has finished."""

    def __init__(self, workers: int = 8) -> None:
        super().__init__(workers, thread_name_prefix="slack-listener")
        self._pending = 0
        self._idle = threading.Condition()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._idle:
            self._pending += 1
        future = super().submit(fn, *args, **kwargs)
        future.add_done_callback(self._done)
        return future

    def _done(self, _future: Future[Any]) -> None:
        with self._idle:
            self._pending -= 1
            self._idle.notify_all()

    def wait_idle(self, timeout: float = 10.0) -> None:
        with self._idle:
            if not self._idle.wait_for(lambda: self._pending == 0, timeout):
                raise AssertionError(f"{self._pending} Slack listener(s) still running after {timeout} s")


@dataclass
class SlackRig:
    settings: Settings
    runtime: Runtime
    redis: Redis
    api: SlackAPI
    model: ScriptedModel
    server: SlackHTTPServer
    executor: TrackingExecutor
    sha: str
    _ts: itertools.count[int]

    @property
    def events_url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}{EVENTS_PATH}"

    def next_ts(self) -> str:
        return f"1710000000.{next(self._ts):06d}"

    def send(self, event: dict[str, Any], headers: dict[str, str] | None = None) -> int:
        """Deliver one Events API event, signed; returns the HTTP status."""
        return signed_post(self.events_url, event_body(event), SECRET, extra_headers=headers)[0]

    def mention(
        self,
        text: str,
        channel: str = "C1",
        user: str = "U1",
        thread_ts: str | None = None,
        files: list[dict[str, Any]] | None = None,
    ) -> str:
        """@codebot TEXT in a channel (with `files` attached: also in conversations.replies, as
        Slack keeps it); returns the message ts."""
        ts = self.next_ts()
        event = mention(channel, ts, text, user=user, thread_ts=thread_ts)
        if files:
            event.update(files=files, upload=True)
            self.api.add_message(channel, {k: v for k, v in event.items() if k not in ("channel", "type")})
        assert self.send(event) == 200
        return ts

    def command(self, text: str, user: str = "U1", channel: str = "C1") -> tuple[int, str]:
        body = command_body(text, user=user, channel=channel, response_url=self.api.response_url())
        status, answer, _ = signed_post(
            self.events_url, body, SECRET, content_type="application/x-www-form-urlencoded"
        )
        return status, answer

    def settle(self) -> None:
        # an event is acked before bolt dispatches it: first every dispatch, then its listener
        wait_until(lambda: self.server.events.waiting == 0)
        self.executor.wait_idle()

    def question_jobs(self) -> list[str]:
        return Queue(QUESTIONS_QUEUE, connection=self.redis).job_ids

    def work(self) -> None:
        queues = [Queue(ADMIN_QUEUE, connection=self.redis), Queue(QUESTIONS_QUEUE, connection=self.redis)]
        SimpleWorker(queues, connection=self.redis).work(burst=True, logging_level="WARNING")


def wait_until(predicate: Callable[[], object], timeout: float = 60.0) -> None:  # a hang guard
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def rig_settings(
    api: SlackAPI, model: ScriptedModel, data_dir: Path, repos_file: Path, **overrides: Any
) -> Settings:
    """Settings for an adapter rig: the fake Slack API, the scripted model, no retries or throttles."""
    options: dict[str, Any] = {
        "data_dir": data_dir,
        "repos_file": repos_file,
        "slack_bot_token": "xoxb-test",
        "slack_signing_secret": SECRET,
        "slack_api_url": api.url,
        "openai_base_url": model.base_url,
        "openai_api_key": "test",
        "model_max_retries": 0,
        "model_timeout_seconds": 10.0,
        "progress_min_interval_seconds": 0.0,
        # the post-and-update path (also the fallback of streaming); streaming tests opt in
        "slack_streaming": False,
    }
    return load_settings(env_file=None, **{**options, **overrides})


def start_adapter(settings: Settings, runtime: Runtime) -> tuple[Redis, TrackingExecutor, SlackHTTPServer]:
    """The real bolt app behind the real HTTP server on a free port, with this runtime installed."""
    runtime_module.install(runtime)
    redis = connect(settings)
    executor = TrackingExecutor()
    app = build_app(settings, executor=executor)
    register(app, SlackDeps(settings=settings, redis=redis, runtime=runtime))
    server = SlackHTTPServer(app, settings, host="127.0.0.1", port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    deadline = time.monotonic() + 60  # a hang guard, for a busy machine
    while not server.server.started:  # uvicorn accepts connections from here on
        assert time.monotonic() < deadline, "the Slack HTTP server did not start"
        time.sleep(0.01)
    return redis, executor, server


def build_slack_rig(tmp: Path, files: dict[str, str] | None = None, **overrides: Any) -> Iterator[SlackRig]:
    """The adapter rig; `payments` holds `files` (default: the e2e payments service)."""
    sha = make_repo(tmp / "payments-src", files if files is not None else DEFAULT_FILES)
    make_repo(tmp / "internal-src", {"README.md": "# internal\nTop secret plans.\n"})
    make_repo(tmp / "web-src", {"README.md": "# web\nThe website.\n"})
    repos_file = tmp / "repos.toml"
    repos_file.write_text(
        f'[[repo]]\nname = "payments"\nurl = "{tmp / "payments-src"}"\n'
        'web_url = "https://github.com/acme/payments"\ndescription = "the payments service"\n\n'
        f'[[repo]]\nname = "internal"\nurl = "{tmp / "internal-src"}"\n'
        f'description = "internal plans"\nchannels = ["slack:{SECRET_CHANNEL}"]\n\n'
        f'[[repo]]\nname = "web-frontend"\nurl = "{tmp / "web-src"}"\ndescription = "the website"\n',
        encoding="utf-8",
    )
    api, model = SlackAPI(), ScriptedModel()
    settings = rig_settings(api, model, tmp / "data", repos_file, **overrides)
    runtime = build_runtime(settings)
    assert runtime.mirrors.sync("payments").ok
    redis, executor, server = start_adapter(settings, runtime)
    try:
        yield SlackRig(settings, runtime, redis, api, model, server, executor, sha, itertools.count(1))
    finally:
        server.close()
        executor.shutdown(wait=True)
        api.close()
        model.close()
        stop_embedded_server(settings)
