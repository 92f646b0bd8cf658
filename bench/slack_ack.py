"""Ack latency of the Slack HTTP adapter, and exactly-once enqueueing under concurrency.

Runs the real `codebot slack --port N` in a subprocess (HTTP mode), against a local stand-in
for the Slack Web API and the embedded Redis in a temporary data dir, then sends N signed
`app_mention` deliveries C at a time (default 200, 20 at a time) from distinct users. With
`--twins` each mention is also delivered as its `message.channels` twin (another event id,
the same message), as Slack does when both are subscribed. Reports ack latency p50/p99/max
as the sender measures it (TCP connect to response), and checks that every message became
exactly one job and got exactly one 👀. The floor, in the same run: the same deliveries to a
bare ASGI app on uvicorn that only checks the signature and answers 200; printed as a ratio.
The Web API stand-in runs in its own process, as Slack's servers are not in the sender's: in
the sender's process, its answers to the adapter's 👀 calls took the GIL from the sender's
threads during the adapter's burst only, not during the floor's.

    .venv/bin/python bench/slack_ack.py [--mentions 200] [--concurrency 20] [--twins] [--idle 3000]

`--idle N` first opens N idle connections to the adapter (connected, nothing sent: idle
keep-alive clients, or a slowloris) and reports the adapter's threads and memory before and
while they are held, sends the deliveries while they are held, and then counts how many of
them the adapter closed within `--idle-wait` seconds.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rq import Queue  # noqa: E402

from config.settings import load_settings  # noqa: E402
from tests.support.slack_api import BOT_USER_ID, SlackAPI, event_body, mention, message, signed_post  # noqa: E402
from worker.jobs.queue import QUESTIONS_QUEUE  # noqa: E402
from worker.ops.redis_connection import connect, stop_embedded_server  # noqa: E402

SECRET = "bench-signing-secret"
GOAL_P99_MS = 100.0
GOAL_RATIO_TO_BARE = 2.0  # issue 22: p99 at most 2x a bare signature-checking app, same run


def _serve_web_api(conn: Connection) -> None:
    api = SlackAPI()
    conn.send(api.url)
    while (method := conn.recv()) is not None:
        conn.send([call.body for call in api.calls_to(method)])
    api.close()


class WebAPIProcess:
    """tests/support/slack_api.py's SlackAPI in a process of its own: `url`, `calls_to`, `close`."""

    def __init__(self) -> None:
        self._conn, child = multiprocessing.Pipe()
        # fork: this process runs no thread yet, and the child needs nothing re-imported
        self._process = multiprocessing.get_context("fork").Process(target=_serve_web_api, args=(child,))
        self._process.start()
        self.url: str = self._conn.recv()

    def calls_to(self, method: str) -> list[SimpleNamespace]:
        self._conn.send(method)
        return [SimpleNamespace(body=body) for body in self._conn.recv()]

    def close(self) -> None:
        self._conn.send(None)
        self._process.join(10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_codebot(
    *command: str, log_path: Path, env: dict[str, str], append: bool = False
) -> subprocess.Popen[bytes]:
    """`codebot COMMAND…` as its own session (so a whole process tree can be signalled), its output
    in `log_path`."""
    with open(log_path, "ab" if append else "wb") as log:  # the child keeps its own copy
        return subprocess.Popen(
            [sys.executable, "-m", "codebot.cli", *command],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )


def wait_healthy(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the adapter did not come up at {url}")


def process_facts(pid: int) -> dict[str, float]:
    """Threads, resident memory (MiB) and open descriptors of a process, from /proc."""
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {
        "threads": int(fields["Threads"].strip()),
        "rss_mib": round(int(fields["VmRSS"].split()[0]) / 1024, 1),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
    }


def open_idle(port: int, count: int) -> list[socket.socket]:
    idle = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.setblocking(False)
        idle.append(sock)
    return idle


def closed_by_server(idle: list[socket.socket]) -> int:
    """How many of these connections the server has closed (EOF or reset on read)."""
    closed = 0
    for sock in idle:
        try:
            if sock.recv(1) == b"":
                closed += 1
        except BlockingIOError:
            continue
        except OSError:
            closed += 1
    return closed


# The floor: the least a Slack HTTP endpoint must do — read the body, check the signature and the
# timestamp, answer 200 — as a bare ASGI app on the same server (uvicorn), in its own process.
BARE_APP = r"""
import hashlib, hmac, sys, time
import uvicorn

SECRET = sys.argv[2].encode()


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    headers = dict(scope["headers"])
    stamp = headers.get(b"x-slack-request-timestamp", b"0")
    mac = hmac.new(SECRET, b"v0:" + stamp + b":" + body, hashlib.sha256).hexdigest()
    good = abs(time.time() - int(stamp)) < 300 and hmac.compare_digest(
        "v0=" + mac, headers.get(b"x-slack-signature", b"").decode()
    )
    status = 200 if good or scope["path"] == "/health" else 401
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", lifespan="off")
"""


def bare_p99(deliveries: list[str], concurrency: int) -> float:
    """p99 ack of the bare signature-checking app for the same deliveries, same concurrency."""
    port = free_port()
    bare = subprocess.Popen([sys.executable, "-c", BARE_APP, str(port), SECRET], cwd=ROOT)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/health")
        url = f"http://127.0.0.1:{port}/slack/events"
        signed_post(url, deliveries[0], SECRET)  # warm-up, as for the adapter
        with ThreadPoolExecutor(concurrency) as pool:
            results = list(pool.map(lambda body: signed_post(url, body, SECRET), deliveries))
        assert {status for status, _, _ in results} == {200}, "the bare app refused a delivery"
        return percentile([seconds * 1000 for _, _, seconds in results], 99)
    finally:
        bare.terminate()
        bare.wait(timeout=10)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mentions", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--twins", action="store_true", help="also deliver each as a message.channels event")
    parser.add_argument("--idle", type=int, default=0, help="idle connections held open meanwhile")
    parser.add_argument(
        "--idle-wait", type=float, default=15.0, help="seconds to wait for the server to drop them"
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="codebot-bench-"))
    repos = work / "repos.toml"
    repos.write_text('[[repo]]\nname = "payments"\nurl = "https://github.com/acme/payments.git"\n')
    api = WebAPIProcess()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("CODEBOT_", "SLACK_", "REDIS_URL"))},
        "SLACK_BOT_TOKEN": "xoxb-bench",
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": api.url,
        "CODEBOT_DATA_DIR": str(work / "data"),
        "CODEBOT_REPOS_FILE": str(repos),
        "CODEBOT_QUEUE_MAX_DEPTH": str(args.mentions * 10),
    }
    settings = load_settings(env_file=None, data_dir=work / "data", repos_file=repos)
    redis = connect(settings)  # starts the embedded server the adapter will share
    port = free_port()
    # Its log goes to a file: a pipe nobody reads fills up (~330 "question queued" lines) and then
    # blocks the adapter's logging, and with it the intake (a 1,000-mention run stopped at ~480).
    adapter_log = work / "adapter.log"
    with adapter_log.open("wb") as log_file:
        adapter = subprocess.Popen(
            [sys.executable, "-m", "codebot.cli", "slack", "--port", str(port)],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=log_file,
        )
    url = f"http://127.0.0.1:{port}/slack/events"
    try:
        wait_healthy(f"http://127.0.0.1:{port}/health")
        warm = {"type": "reaction_added", "user": "U0", "reaction": "x", "item": {}, "event_ts": "1.0"}
        signed_post(url, event_body(warm), SECRET)  # bolt's first request calls auth.test once
        idle: list[socket.socket] = []
        idle_report: dict[str, object] = {}
        if args.idle:
            idle_report["before"] = process_facts(adapter.pid)
            idle = open_idle(port, args.idle)
            time.sleep(2.0)  # let the server accept them all
            idle_report["holding"] = process_facts(adapter.pid)

        deliveries: list[str] = []
        for n in range(args.mentions):
            ts, user = f"1720000000.{n:06d}", f"U{n:05d}"
            deliveries.append(event_body(mention("CBENCH", ts, f"question number {n}?", user=user)))
            if args.twins:
                text = f"<@{BOT_USER_ID}> question number {n}?"
                deliveries.append(event_body(message("CBENCH", ts, text, user=user)))
        started = time.monotonic()
        with ThreadPoolExecutor(args.concurrency) as pool:
            results = list(pool.map(lambda body: signed_post(url, body, SECRET), deliveries))
        sent_seconds = time.monotonic() - started
        latencies = [seconds * 1000 for _, _, seconds in results]
        statuses = {status for status, _, _ in results}

        deadline = time.monotonic() + 30
        queue = Queue(QUESTIONS_QUEUE, connection=redis)
        while time.monotonic() < deadline and len(api.calls_to("reactions.add")) < args.mentions:
            time.sleep(0.05)
        time.sleep(0.5)  # let any duplicate that would slip through show up
        job_ids = queue.job_ids
        if idle:
            waited = time.monotonic() - started
            time.sleep(max(0.0, args.idle_wait - waited))
            idle_report["closed_by_server"] = closed_by_server(idle)
            idle_report["after_seconds"] = round(time.monotonic() - started, 1)
            idle_report["after"] = process_facts(adapter.pid)
            for sock in idle:
                sock.close()
        expected = {f"q-slack-CBENCH-1720000000_{n:06d}" for n in range(args.mentions)}
        reacted = [c.body["timestamp"] for c in api.calls_to("reactions.add")]
        report: dict[str, Any] = {
            "deliveries": len(deliveries),
            "concurrency": args.concurrency,
            "http_statuses": sorted(statuses),
            "ack_ms_p50": round(statistics.median(latencies), 1),
            "ack_ms_p99": round(percentile(latencies, 99), 1),
            "ack_ms_max": round(max(latencies), 1),
            "send_seconds": round(sent_seconds, 2),
            "jobs": len(job_ids),
            "unique_jobs": len(set(job_ids)),
            "jobs_match_messages": set(job_ids) == expected,
            "eyes_reactions": len(reacted),
            "eyes_unique": len(set(reacted)),
        }
        if idle_report:
            report["idle"] = {"connections": args.idle, **idle_report}
        floor = bare_p99(deliveries, args.concurrency)  # same run, same machine load
        report["bare_app_ack_ms_p99"] = round(floor, 1)
        report["p99_ratio_to_bare_app"] = round(report["ack_ms_p99"] / floor, 2)
        report["load_1min"] = round(os.getloadavg()[0], 2)
        print(json.dumps(report, indent=2))
        checks = {
            "every delivery answered 200": statuses == {200},
            "every message enqueued exactly once, one 👀 each": report["jobs_match_messages"]
            and len(job_ids) == args.mentions
            and len(reacted) == len(set(reacted)) == args.mentions,
            f"ack p99 < {GOAL_P99_MS:.0f} ms": report["ack_ms_p99"] < GOAL_P99_MS,
            f"ack p99 ÷ bare app's ≤ {GOAL_RATIO_TO_BARE:g} (issue 22)": report["p99_ratio_to_bare_app"]
            <= GOAL_RATIO_TO_BARE,
        }
        for check, passed in checks.items():
            print(f"{'PASS' if passed else 'FAIL'}: {check}")
        ok = all(checks.values())
        if not ok:
            print(f"adapter log: {adapter_log}")
        return 0 if ok else 1
    finally:
        adapter.send_signal(signal.SIGTERM)
        try:
            adapter.wait(timeout=10)
        except subprocess.TimeoutExpired:
            adapter.kill()
        api.close()
        stop_embedded_server(settings)


if __name__ == "__main__":
    sys.exit(main())
