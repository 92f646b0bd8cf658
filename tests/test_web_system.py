"""The console's System page: the model settings each real `codebot worker` reports (never the
console's own, never a key), and every reference a link to the Questions page's lookup, which
finds the question in a real SQLite history. Real Redis, the console's app on uvicorn, plain HTTP."""

from __future__ import annotations

import html
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis

from bot.web.app import build_app
from config.settings import load_settings
from tests.support.console_rig import OPERATOR_TOKEN, request, serving
from tests.support.git_remote import GitRemote, write_whitelist
from tests.support.redis_servers import Server, redis_server
from tests.support.worker_procs import start_worker, stop_worker, wait_registered
from worker.agent.endpoint_memory import record_model_error
from worker.history.rows import Event
from worker.history.store import open_engine, upgrade, write_events
from worker.jobs.question_log import QUESTIONS_KEY
from worker.jobs.runtime import Runtime, build_runtime

BEARER = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
WORKER_KEY = "sk-worker-key-0123456789"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with redis_server(tmp_path) as started:
        yield started


def console(tmp_path: Path, server: Server) -> Runtime:
    """The console's own settings: another model at another endpoint than the workers'."""
    remote = GitRemote.create(tmp_path / "origin")
    write_whitelist(tmp_path / "conf", [{"name": "app", "url": str(remote.bare)}])
    settings = load_settings(
        env_file=None,
        data_dir=tmp_path / "console-data",
        repos_file=tmp_path / "conf" / "repos.toml",
        redis_url=server.url,
        web_token=OPERATOR_TOKEN,
        model="console-own-model",
    )
    return build_runtime(settings)


def system_page(runtime: Runtime, redis: Redis, path: str = "/system", **app: object) -> str:
    with serving(build_app(runtime, redis, **app)) as base:  # type: ignore[arg-type]
        status, _, body = request(base + path, BEARER)
    assert status == 200
    return body


def test_system_lists_the_model_settings_each_worker_reports_not_the_consoles_and_no_key(
    tmp_path: Path, server: Server
) -> None:
    runtime = console(tmp_path, server)
    worker_settings = runtime.settings.model_copy(
        update={
            "data_dir": tmp_path / "worker-data",
            "model": "worker-model-x",
            "openai_base_url": "http://ops:hunter2@models.internal:8000/v1?api-key=sk-in-query",
            "model_max_tokens": 4096,
            "question_deadline_seconds": 90.0,
        }
    )
    worker = start_worker(worker_settings, OPENAI_API_KEY=WORKER_KEY)
    try:
        wait_registered(server.client(), worker)
        body = system_page(runtime, server.client())
    finally:
        stop_worker(worker)
    table = body[body.index('id="worker-models"') : body.index("</table>", body.index('id="worker-models"'))]
    cells = [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", table)]
    assert cells[2:] == ["worker-model-x", "http://models.internal:8000/v1", "4,096", "60 s", "90 s"]
    assert "console-own-model" not in body
    for secret in ("hunter2", "sk-in-query", WORKER_KEY):
        assert secret not in body


def test_a_reference_on_system_is_a_link_that_finds_its_question(tmp_path: Path, server: Server) -> None:
    runtime = console(tmp_path, server)
    redis = server.client()
    record_model_error(redis, {"ref": "77ca22fa", "kind": "http", "status": 500, "detail": "boom"})
    engine = open_engine(f"sqlite:///{tmp_path / 'history.sqlite3'}")
    upgrade(engine)
    asked = {
        "id": "slack:T1:C1:77",
        "ref": "77ca22fa",
        "status": "failed",
        "platform": "slack",
        "channel": "C1",
    }
    write_events(engine, [Event("e" * 32, "question", time.time() - 3600, asked)])
    body = system_page(runtime, redis, history=engine)
    link = re.search(r'<a class="ref" href="([^"]+)">77ca22fa</a>', body)
    assert link is not None
    found = system_page(runtime, redis, html.unescape(link.group(1)), history=engine)
    assert "1 question<" in found and 'href="/questions/slack%3AT1%3AC1%3A77"' in found


def test_without_a_history_a_reference_on_system_still_finds_its_question_in_redis(
    tmp_path: Path, server: Server
) -> None:
    runtime = console(tmp_path, server)
    redis = server.client()
    record_model_error(redis, {"ref": "0badc0de", "kind": "http", "status": 502, "detail": "bad gateway"})
    for n, ref in enumerate(("0badc0de", "12345678")):
        asked = {
            "id": f"q-{n}",
            "ref": ref,
            "status": "failed",
            "platform": "slack",
            "channel": "C1",
            "at": 1.0,
        }
        redis.lpush(QUESTIONS_KEY, json.dumps(asked))
    link = re.search(r'<a class="ref" href="([^"]+)">0badc0de</a>', system_page(runtime, redis))
    assert link is not None
    found = system_page(runtime, redis, html.unescape(link.group(1)))
    assert "1 question<" in found and 'href="/questions/q-0"' in found and "12345678" not in found
