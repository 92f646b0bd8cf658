"""`codebot slack` in Socket Mode, end to end over a real WebSocket.

The adapter runs as the real command in a process of its own (`serve()`: apps.connections.open
on the fake Web API, then slack_sdk's built-in client on the fake Socket Mode server). The test
pushes envelopes as Slack would, reads the acks the client sends back, runs a burst worker
here, and stops the adapter with SIGTERM as a supervisor would.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import pytest

from tests.support.model_server import text, tool_calls
from tests.support.slack_api import BOT_USER_ID, command_body, event_body, mention, message
from tests.support.slack_rig import SlackRig, build_slack_rig
from tests.support.slack_socket import Ack, SlackSocket
from tests.support.worker_procs import settings_env

# Each test starts a real `codebot slack` process: at load 16 on 2 cores its start alone took
# over 15 s (the socket's wait was 15 s), so these run as slow tests, with the slow tests' limit.
pytestmark = pytest.mark.slow

ACK_DEADLINE_SECONDS = 3.0  # Slack's: later, it retries the event (or the user sees a timeout)
STOP_TIMEOUT_SECONDS = 10.0  # the client's socket read times out after 3 s, then it exits
READ_RETRY = ("read_file", {"repo": "payments", "path": "payments/retry.py", "start_line": 1, "end_line": 13})


@dataclass
class SocketModeAdapter:
    rig: SlackRig
    socket: SlackSocket
    process: subprocess.Popen[bytes]

    def deliver(self, event: dict[str, Any]) -> Ack:
        """One Events API envelope around `event` (a fresh event_id); returns the client's ack."""
        return self.socket.wait_ack(self.socket.push_event(json.loads(event_body(event))))

    def redeliver(self, ack: Ack, retry_attempt: int) -> Ack:
        """The envelope behind `ack` again, as Slack retries it (same event_id, new envelope id)."""
        sent = self.socket.envelopes[ack.envelope_id]
        envelope = self.socket.push_event(sent["payload"], retry_attempt, "timeout")
        return self.socket.wait_ack(envelope)

    def command(self, words: str) -> Ack:
        fields = dict(parse_qsl(command_body(words, response_url=self.rig.api.response_url())))
        return self.socket.wait_ack(self.socket.push_command(fields))

    def latency(self, ack: Ack) -> float:
        return ack.at - self.socket.sent[ack.envelope_id]

    def stop(self) -> int:
        """SIGTERM, as a supervisor stops it; its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(STOP_TIMEOUT_SECONDS)


@pytest.fixture
def adapter(tmp_path: Path) -> Iterator[SocketModeAdapter]:
    # Socket Mode: an app-level token and no signing secret (envelopes are not signed). The
    # rig's own in-process HTTP adapter stays idle; its Redis, fake API and model are shared.
    for rig in build_slack_rig(tmp_path, slack_app_token="xapp-test", slack_signing_secret=None):
        log = tmp_path / "adapter.log"
        with SlackSocket() as socket, log.open("wb") as out:
            rig.api.socket_url = socket.url
            process = subprocess.Popen(
                [sys.executable, "-m", "codebot.cli", "slack"],
                env=settings_env(rig.settings),
                cwd=Path.cwd(),  # the test's empty directory: no developer .env
                stdout=out,
                stderr=out,
            )
            running = SocketModeAdapter(rig, socket, process)
            try:
                socket.wait_connected()
                yield running
            finally:
                try:
                    running.stop()
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                print(log.read_text())  # shown by pytest when the test failed


def test_a_mention_over_the_socket_is_acked_at_once_and_answered_in_its_thread(
    adapter: SocketModeAdapter,
) -> None:
    rig = adapter.rig
    rig.model.enqueue(tool_calls(READ_RETRY), text("It retries 5 times [payments:payments/retry.py#L3]."))
    ts = rig.next_ts()
    ack = adapter.deliver(mention("C1", ts, "how many times does retry try?"))
    assert ack.payload is None and adapter.latency(ack) < ACK_DEADLINE_SECONDS
    rig.api.wait_for("reactions.add")  # the listener's last step: the question is queued
    assert rig.question_jobs() == [f"q-slack-C1-{ts.replace('.', '_')}"]
    rig.work()
    (reply,) = rig.api.thread_texts("C1", ts)
    assert reply.startswith("It retries 5 times")
    assert f"https://github.com/acme/payments/blob/{rig.sha}/payments/retry.py#L3" in reply
    assert rig.api.reactions("C1", ts) == ["white_check_mark"]
    assert [c.headers["Authorization"] for c in rig.api.calls_to("apps.connections.open")] == [
        "Bearer xapp-test"
    ] * 2  # serve() checks the token once, then the client asks for its URL


def test_a_retried_envelope_and_the_same_message_as_a_message_event_make_one_job(
    adapter: SocketModeAdapter,
) -> None:
    rig = adapter.rig
    ts = rig.next_ts()
    first = adapter.deliver(mention("C1", ts, "where is the retry limit set?"))
    acks = [
        first,
        adapter.redeliver(first, retry_attempt=1),
        adapter.deliver(message("C1", ts, f"<@{BOT_USER_ID}> where is the retry limit set?")),
    ]
    assert all(adapter.latency(ack) < ACK_DEADLINE_SECONDS for ack in acks)
    assert all(len(adapter.socket.acks_for(ack.envelope_id)) == 1 for ack in acks)
    assert adapter.stop() == 0  # SIGTERM: the listeners of every acked envelope have finished
    assert rig.question_jobs() == [f"q-slack-C1-{ts.replace('.', '_')}"]
    assert len(rig.api.calls_to("reactions.add")) == 1
    adapter.socket.wait_open(0)  # and the client let go of its connection


def test_a_mention_acked_just_before_sigterm_is_still_queued(adapter: SocketModeAdapter) -> None:
    rig = adapter.rig
    ts = rig.next_ts()
    adapter.deliver(mention("C1", ts, "how does retry work?"))
    # Slack will not redeliver an acked envelope: its listener must finish before the exit.
    assert adapter.stop() == 0
    assert rig.question_jobs() == [f"q-slack-C1-{ts.replace('.', '_')}"]
    assert rig.api.reactions("C1", ts) == ["eyes"]
    adapter.socket.wait_open(0)


def test_codebot_help_over_the_socket_is_answered_privately_in_the_ack(adapter: SocketModeAdapter) -> None:
    ack = adapter.command("help")
    assert adapter.latency(ack) < ACK_DEADLINE_SECONDS
    assert ack.payload is not None and ack.payload["response_type"] == "ephemeral"
    assert "/codebot refresh` (a repo name or `all`)" in ack.payload["text"]
    assert ack.payload["text"].startswith("Ask me about the code")
    repos = adapter.command("repos")  # reads Redis and disk: an empty ack, then the response_url
    assert repos.payload is None
    (listing,) = adapter.rig.api.wait_for("response_url")
    assert "`payments` — the payments service" in listing.body["text"]


def test_a_disconnect_notice_makes_the_adapter_reconnect_and_keep_acking(adapter: SocketModeAdapter) -> None:
    adapter.socket.disconnect("refresh_requested")
    adapter.socket.wait_connected(count=2)  # a new URL from apps.connections.open, a new hello
    # slack_sdk's built-in client reads the new connection only once it has closed the old one,
    # which waits out its 3 s socket read: an envelope sent in between is acked ~3 s late.
    adapter.socket.wait_open(1)
    ack = adapter.deliver(mention("C1", adapter.rig.next_ts(), "how does retry work?"))
    assert adapter.latency(ack) < ACK_DEADLINE_SECONDS
    adapter.rig.api.wait_for("reactions.add")
    assert len(adapter.rig.api.calls_to("apps.connections.open")) == 3
    assert adapter.stop() == 0
