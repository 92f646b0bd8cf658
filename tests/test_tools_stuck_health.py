"""What the asker and the operator see of a tool call stuck in the kernel: the question ends
at its deadline with an apology naming what hung; a worker process whose tool threads are all
stuck says so in `/health` (503 and why), `codebot status` and the console, and once the read
returns it is healthy again.

The worker is a real one on a real Redis; its tool call blocks in the kernel on a FIFO no
writer opens (released by the test), and is given up at its deadline."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from bot.web.ops_data import worker_rows
from tests.support.e2e import Rig
from tests.support.model_server import tool_calls
from tests.support.stuck import blocked_on, wrapped
from worker.agent import tool_round
from worker.agent.endpoint_memory import recent_model_errors
from worker.agent.tool_pool import ToolPool, ToolStuck
from worker.agent.tool_round import ToolRound
from worker.jobs import runtime as runtime_module
from worker.jobs.admin import status_report
from worker.jobs.queue import QUESTIONS_QUEUE, queue_depth
from worker.jobs.status_view import render_status, status_facts
from worker.jobs.threaded_worker import ThreadedWorker
from worker.jobs.tool_threads import stuck_tool_threads, unhealthy_reason
from worker.ops.metrics import serve_metrics

WAIT = 60.0  # seconds an event may take on a busy machine; a pass never waits this long


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@dataclasses.dataclass
class Stuck:
    pool: ToolPool
    health: str  # the worker's /health
    metrics: str  # its /metrics

    def release(self, fifo: Path) -> None:
        """The mount comes back: the stuck read returns; waits until the pool hears of it."""
        healed = threading.Event()
        self.pool.on_change(lambda state: healed.set() if state.stuck == 0 else None)
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        assert healed.wait(WAIT)


@pytest.fixture
def exhausted(rig: Rig, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Stuck]:
    """A worker ("stuck-worker") whose one tool thread is stuck reading `tmp_path/fifo`, and its
    metrics port; healthy before the read hung."""
    pool = ToolPool(1, 0)  # one thread, none replaced: one stuck call exhausts it
    monkeypatch.setattr(tool_round, "_pool", pool)
    monkeypatch.setattr(tool_round, "_pool_pid", os.getpid())
    monkeypatch.setattr(tool_round, "_listeners", [])
    worker = ThreadedWorker([QUESTIONS_QUEUE], connection=rig.redis, name="stuck-worker")
    worker.register_birth()
    server = serve_metrics(rig.redis, 0, queue_depth, health=unhealthy_reason, stuck=stuck_tool_threads)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    try:
        assert fetch(f"{base}/health") == (200, "ok\n")
        calls: ToolRound[bytes] = ToolRound(deadline=time.monotonic())  # given up after the grace
        with pytest.raises(ToolStuck):
            calls.result(calls.start("read", lambda: fifo.read_bytes()))
        yield Stuck(pool, f"{base}/health", f"{base}/metrics")
    finally:
        os.close(os.open(fifo, os.O_RDWR))  # releases a reader still waiting, whatever failed
        server.shutdown()
        server.server_close()
        worker.register_death()


def test_a_worker_whose_tool_threads_are_all_stuck_fails_health_until_the_read_returns(
    exhausted: Stuck, tmp_path: Path
) -> None:
    status, reason = fetch(exhausted.health)
    assert status == 503
    assert reason.startswith("unhealthy: the tool threads of worker(s) stuck-worker are exhausted")
    assert "\ncodebot_tool_threads_stuck 1.0\n" in fetch(exhausted.metrics)[1]
    exhausted.release(tmp_path / "fifo")
    assert fetch(exhausted.health) == (200, "ok\n")
    assert "\ncodebot_tool_threads_stuck 0.0\n" in fetch(exhausted.metrics)[1]


def test_a_worker_whose_tool_threads_are_all_stuck_says_so_in_status_and_the_console(
    exhausted: Stuck, rig: Rig
) -> None:
    [facts] = [w for w in status_facts(rig.redis, rig.runtime)["workers"] if w["name"] == "stuck-worker"]
    assert facts["tool_threads"] == {"size": 1, "capacity": 0, "busy": 0, "stuck": 1, "exhausted": True}
    terminal = Console(record=True, width=400)
    render_status(status_facts(rig.redis, rig.runtime), terminal)
    [line] = [line for line in terminal.export_text().splitlines() if "stuck-worker on" in line]
    assert "TOOL THREADS EXHAUSTED: 1 tool calls stuck on reads that never returned" in line
    [row] = [row for row in worker_rows(rig.redis) if row.name == "stuck-worker"]
    assert "TOOL THREADS EXHAUSTED: 1 tool calls stuck" in row.state
    assert "TOOL THREADS EXHAUSTED: 1 tool calls stuck" in status_report(rig.redis, rig.runtime)


@pytest.mark.rig(question_deadline_seconds=4)
def test_a_question_whose_read_never_returns_gets_an_apology_naming_it_and_no_model_error_is_recorded(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tool_round, "_pool", ToolPool(2, 1))
    monkeypatch.setattr(tool_round, "_pool_pid", os.getpid())
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)
    hung = dataclasses.replace(rig.runtime, registry=wrapped(read_file=blocked_on(fifo)))
    monkeypatch.setattr(runtime_module, "_installed", hung)
    rig.model.enqueue(tool_calls(("read_file", {"repo": "payments", "path": "README.md"})))
    try:
        _question, events = rig.ask("how does retry work?")
    finally:
        os.close(os.open(fifo, os.O_RDWR))  # the mount comes back
    kind, fields = rig.final(events)
    assert kind == "failed" and fields["outcome"] == "failed"
    reply = str(fields["text"])
    assert reply.startswith(
        "Sorry, I could not answer: read_file of `payments/README.md` did not return within 4 s"
    )
    assert "No matches" not in reply and "something went wrong" not in reply
    assert recent_model_errors(rig.redis, 5) == []  # the endpoint did nothing wrong
