"""Slack HTTP mode acknowledges an Events API delivery before any of its work: bolt's middleware,
the intake (Redis, the 👀 call), and, in `codebot slack`, in another process than the one that
answers HTTP (bot/slack/intake_process.py). How fast: bench/slack_ack.py."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from bot.slack.app import EVENTS_PATH, SlackHTTPServer, build_app, register
from bot.slack.handlers import SlackDeps
from bot.slack.http_server import Handoff
from tests.support.slack_api import event_body, mention, signed_post
from tests.support.slack_rig import SECRET, SlackRig, wait_until
from tests.support.worker_procs import settings_env

pytestmark = pytest.mark.rig("slack")


def test_a_mention_is_acknowledged_while_the_adapter_still_waits_on_slack_for_auth_test(
    rig: SlackRig,
) -> None:
    # bolt's first dispatch asks Slack's auth.test who it is; here Slack is slow to answer it
    answer_auth_test = threading.Event()
    rig.api.hang("auth.test", 20.0, until=answer_auth_test)
    ts = rig.next_ts()
    assert rig.send(mention("C1", ts, "how does retry work?")) == 200
    # acked while nothing of its work is done: auth.test unanswered, nothing queued, no 👀
    assert rig.api.released == []
    assert rig.question_jobs() == []
    assert rig.api.reactions("C1", ts) == []
    wait_until(lambda: rig.api.held)  # and its dispatch is waiting on Slack, not lost
    answer_auth_test.set()
    rig.settle()
    assert rig.question_jobs() == [f"q-slack-C1-{ts.replace('.', '_')}"]
    assert rig.api.reactions("C1", ts) == ["eyes"]


def test_a_burst_bigger_than_the_listener_pool_makes_exactly_one_job_per_message(rig: SlackRig) -> None:
    stamps = [rig.next_ts() for _ in range(40)]  # the rig's listener pool has 8 threads
    bodies = [
        event_body(mention("C1", ts, f"question {n}?", user=f"U{n:03d}")) for n, ts in enumerate(stamps)
    ]
    with ThreadPoolExecutor(20) as senders:
        statuses = list(senders.map(lambda body: signed_post(rig.events_url, body, SECRET)[0], bodies))
    rig.settle()
    assert statuses == [200] * 40
    assert sorted(rig.question_jobs()) == sorted(f"q-slack-C1-{ts.replace('.', '_')}" for ts in stamps)
    assert sorted(call.body["timestamp"] for call in rig.api.calls_to("reactions.add")) == sorted(stamps)


@contextmanager
def server_with_handoff(rig: SlackRig, handoff: Handoff) -> Iterator[str]:
    """A second HTTP server on the rig's app wiring, handing events to `handoff` (as `codebot
    slack` hands them to its intake process); yields its events URL."""
    app = build_app(rig.settings, executor=rig.executor)
    register(app, SlackDeps(settings=rig.settings, redis=rig.redis, runtime=rig.runtime))
    server = SlackHTTPServer(app, rig.settings, port=0, handoff=handoff)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        wait_until(lambda: server.server.started)
        yield f"http://127.0.0.1:{server.port}{EVENTS_PATH}"
    finally:
        server.close()


def test_an_event_handed_to_the_intake_process_is_not_also_run_by_the_http_process(rig: SlackRig) -> None:
    handed: list[tuple[str, dict[str, list[str]]]] = []

    def take(body: str, headers: dict[str, list[str]]) -> bool:
        handed.append((body, headers))
        return True

    with server_with_handoff(rig, take) as url:
        body = event_body(mention("C1", rig.next_ts(), "how does retry work?"))
        assert signed_post(url, body, SECRET)[0] == 200
    rig.settle()
    assert [delivered for delivered, _ in handed] == [body]  # as it came, for bolt to check again
    assert handed[0][1]["x-slack-signature"][0].startswith("v0=")
    assert rig.question_jobs() == []  # only the intake process (here: nobody) runs it


def test_an_event_the_intake_process_has_no_room_for_is_run_by_the_http_process(rig: SlackRig) -> None:
    with server_with_handoff(rig, lambda body, headers: False) as url:  # its queue is full
        ts = rig.next_ts()
        assert signed_post(url, event_body(mention("C1", ts, "how does retry work?")), SECRET)[0] == 200
        rig.settle()
    assert rig.question_jobs() == [f"q-slack-C1-{ts.replace('.', '_')}"]
    assert rig.api.reactions("C1", ts) == ["eyes"]


@contextmanager
def http_adapter(rig: SlackRig, log: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`codebot slack --port N` on the rig's Redis and Web API; yields it and its events URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with log.open("wb") as out:
        command = [sys.executable, "-m", "codebot.cli", "slack", "--port", str(port)]
        process = subprocess.Popen(command, env=settings_env(rig.settings), stdout=out, stderr=out)
        try:
            wait_until(lambda: _healthy(f"http://127.0.0.1:{port}/health"), timeout=60)
            yield process, f"http://127.0.0.1:{port}/slack/events"
        finally:
            if process.poll() is None:
                process.kill()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


def _intake_processes(pid: int) -> list[int]:
    """The adapter's spawned children (not multiprocessing's resource tracker)."""
    tasks = Path(f"/proc/{pid}/task").iterdir()  # a child is listed under the thread that started it
    children = [int(child) for task in tasks for child in (task / "children").read_text().split()]
    return [child for child in children if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()]


def test_codebot_slack_runs_the_intake_in_its_own_process_and_replaces_it_when_it_dies(
    rig: SlackRig, tmp_path: Path
) -> None:
    log = tmp_path / "adapter.log"
    with http_adapter(rig, log) as (adapter, url):
        first = rig.next_ts()
        assert signed_post(url, event_body(mention("C1", first, "how does retry work?")), SECRET)[0] == 200
        wait_until(lambda: rig.api.reactions("C1", first) == ["eyes"], timeout=30)
        (intake,) = _intake_processes(adapter.pid)
        assert _niceness(intake) == rig.settings.slack_intake_niceness == 10  # the acks go first
        subprocess.run(["kill", "-9", str(intake)], check=True)
        wait_until(lambda: not _alive(intake))
        second = rig.next_ts()
        assert signed_post(url, event_body(mention("C1", second, "and the limit?")), SECRET)[0] == 200
        wait_until(lambda: rig.api.reactions("C1", second) == ["eyes"], timeout=60)
        (replacement,) = _intake_processes(adapter.pid)
        adapter.send_signal(signal.SIGTERM)
        assert adapter.wait(30) == 0, log.read_text()
    assert "the intake process died" in log.read_text()
    assert sorted(rig.question_jobs()) == sorted(
        f"q-slack-C1-{ts.replace('.', '_')}" for ts in (first, second)
    )
    assert not _alive(replacement)  # it stopped with the adapter: no orphan left behind


def _niceness(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] not in ("Z", "X")
    except FileNotFoundError:
        return False
