"""The Slack HTTP mode's server: bounded connections, time and threads; `app_rate_limited`; SIGTERM.

The real bolt app behind the real uvicorn server (bot/slack/http_server.py), driven over real sockets.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.slack_api import event_body, mention, signed_post
from tests.support.slack_rig import SECRET, SlackRig, build_slack_rig
from tests.support.worker_procs import settings_env


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[SlackRig]:
    yield from build_slack_rig(tmp_path, slack_http_request_seconds=1.0, slack_http_max_connections=50)


def idle_connections(rig: SlackRig, count: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", rig.server.port), timeout=30) for _ in range(count)]


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except TimeoutError:  # still open when the socket's timeout ran out
        return False
    except OSError:
        return True


def trickle_until_dropped(port: int, limit_seconds: float) -> float | None:
    """Send a request header a byte every 0.2 s (slowloris); seconds until the server dropped us."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as trickler:
        for byte in b"POST /slack/events HTTP/1.1\r\nHost: x\r\n" * 100:
            if time.monotonic() - started > limit_seconds:
                return None
            try:
                trickler.send(bytes([byte]))
            except OSError:
                return time.monotonic() - started
            time.sleep(0.2)
    return None


def test_idle_and_trickling_connections_hold_no_thread_and_are_dropped_after_the_request_deadline(
    rig: SlackRig,
) -> None:
    threads_before = threading.active_count()
    idle = idle_connections(rig, 40)
    time.sleep(0.2)
    assert threading.active_count() <= threads_before + 2  # no thread per connection
    valid = event_body(mention("C1", rig.next_ts(), "how does retry work?"))
    assert signed_post(rig.events_url, valid, SECRET)[0] == 200  # still served meanwhile
    assert all(closed_by_server(sock) for sock in idle)  # each had 1 s to send a request
    dropped_after = trickle_until_dropped(rig.server.port, limit_seconds=20)
    assert dropped_after is not None  # a byte at a time does not buy more time (expected: ~1 s)
    for sock in idle:
        sock.close()


def test_beyond_the_connection_limit_the_longest_idle_connections_make_room(tmp_path: Path) -> None:
    bounds = {
        "slack_http_request_seconds": 60.0,
        "slack_http_idle_seconds": 60.0,
        "slack_http_max_connections": 50,
    }
    for rig in build_slack_rig(tmp_path, **bounds):
        idle = idle_connections(rig, 50)
        for sock in idle:
            sock.settimeout(10)  # far less than 60 s: only the cap can close one in time
        time.sleep(0.2)  # all accepted, all idle
        valid = event_body(mention("C1", rig.next_ts(), "how does retry work?"))
        assert signed_post(rig.events_url, valid, SECRET)[0] == 200  # served, not 503
        assert closed_by_server(idle[0])  # the longest idle made room, long before its 60 s
        idle[-1].settimeout(0.5)
        with pytest.raises(TimeoutError):
            idle[-1].recv(1)  # the newest idle ones are still open
        for sock in idle:
            sock.close()


def test_app_rate_limited_is_acknowledged_and_logged(rig: SlackRig, caplog: pytest.LogCaptureFixture) -> None:
    body = json.dumps(
        {
            "token": "legacy",
            "type": "app_rate_limited",
            "team_id": "T0001",
            "minute_rate_limited": 1518467820,
            "api_app_id": "A0001",
        }
    )
    with caplog.at_level(logging.WARNING, logger="codebot.slack"):
        status, _, _ = signed_post(rig.events_url, body, SECRET)
        unsigned, _, _ = signed_post(rig.events_url, body, "not-the-secret")
    assert status == 200 and unsigned == 401  # acknowledged, so Slack does not retry it; still verified
    warned = [r.getMessage() for r in caplog.records if "app_rate_limited" in r.getMessage()]
    assert len(warned) == 1 and "team T0001" in warned[0] and "1518467820" in warned[0]


def test_sigterm_stops_http_mode_after_the_requests_in_flight_and_exits_zero(
    rig: SlackRig, tmp_path: Path
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "adapter.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "codebot.cli", "slack", "--port", str(port)],
            env=settings_env(rig.settings),
            stdout=out,
            stderr=out,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60  # a hang guard: never go on with a server not yet up
            while True:
                try:
                    urllib.request.urlopen(f"{url}/health", timeout=1)
                    break
                except OSError:
                    assert time.monotonic() < deadline, log.read_text()
                    time.sleep(0.1)
            body = event_body(mention("C1", rig.next_ts(), "how does retry work?"))
            assert signed_post(f"{url}/slack/events", body, SECRET)[0] == 200
            process.send_signal(signal.SIGTERM)
            assert process.wait(30) == 0, log.read_text()
        finally:
            if process.poll() is None:
                process.kill()
    assert "stopped" in log.read_text()
    assert len(rig.question_jobs()) == 1  # the acked mention's listener finished before exit
