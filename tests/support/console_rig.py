"""The web console (`codebot web`) over a Redis filled by real runs of the scripted model.

`fill(rig)` asks the end-to-end rig's real worker a few questions (answered, failed, one with
hostile text), votes on them, and records syncs (one failed); `serving(app)` runs the console's
ASGI app on uvicorn (configured as `codebot web` configures it) on 127.0.0.1, an ephemeral port,
in a thread; `request(...)` is one plain HTTP request, from a chosen local address (127.0.0.0/8 is
all loopback, so a test can be several peers).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.client import HTTPConnection
from urllib.parse import urlsplit

import uvicorn
from starlette.applications import Starlette

from bot.web.server import uvicorn_config
from tests.support.e2e import Rig
from tests.support.model_server import error, text, tool_calls
from worker.jobs import feedback
from worker.jobs.question import Question
from worker.repos.mirrors import SyncResult
from worker.repos.refresh import record_refresh

HOSTILE = '<script>alert("q")</script><img src=x onerror=alert(1)> @here'
HOSTILE_REASON = '</td><script>alert("reason")</script> wrong file'
OPERATOR_TOKEN = "operator-token-0123456789abcdefghijklmn"  # the console wants 32 characters or more
ADMIN_TOKEN = "admin-token-0123456789abcdefghijklmnopq"


@dataclass(frozen=True)
class Filled:
    answered: Question
    hostile: Question
    failed: Question


def fill(rig: Rig) -> Filled:
    rig.model.enqueue(
        tool_calls(("search", {"pattern": "def retry"})),
        tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"})),
        text("It retries five times [payments:payments/retry.py#L3]."),
    )
    answered, _ = rig.ask("how many times does retry try?")
    rig.model.enqueue(
        tool_calls(("search", {"pattern": "<script>alert('trace')</script>"})),
        text("Nothing matched that [payments:README.md#L1]."),
    )
    hostile, _ = rig.ask(HOSTILE)
    rig.model.enqueue(error(500))
    failed, _ = rig.ask("why does payments time out?")
    settings = rig.settings
    feedback.record_vote(rig.redis, settings, answered.id, "console", "U1", "up", "console")
    feedback.record_vote(rig.redis, settings, hostile.id, "console", "U2", "down", "console")
    feedback.record_reason(rig.redis, settings, hostile.id, "U2", HOSTILE_REASON)
    record_refresh(rig.redis, rig.runtime.mirrors, rig.runtime.mirrors.sync("payments"), "worker-a")
    broken = SyncResult("payments", False, rig.sha, False, "git fetch: could not read from remote", False)
    record_refresh(rig.redis, rig.runtime.mirrors, broken, "worker-b")
    return Filled(answered, hostile, failed)


@contextmanager
def serving(app: Starlette) -> Iterator[str]:
    """The app on 127.0.0.1:<free port>; yields its base URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn_config(app))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:  # never yield a server not yet up
        assert time.monotonic() < deadline, "the console's server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        listener.close()


def request(
    url: str, headers: dict[str, str] | None = None, data: bytes | None = None, source: str = "127.0.0.1"
) -> tuple[int, dict[str, str], str]:
    """One request (POST when `data` is given) from `source`; a redirect is returned, not followed.
    Header names come back lower-case."""
    parts = urlsplit(url)
    connection = HTTPConnection(parts.netloc, timeout=30, source_address=(source, 0))
    try:
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        body_headers = {"Content-Type": "application/x-www-form-urlencoded"} if data is not None else {}
        connection.request(
            "POST" if data is not None else "GET", path, data, {**body_headers, **(headers or {})}
        )
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode()
    finally:
        connection.close()
