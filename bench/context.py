"""Time from a Slack mention to the model's first request, with a thread as context (issue 32).

Runs what production runs: the real `codebot slack --port N` adapter and a real `codebot worker`
(its deployed pool), each a subprocess, over the embedded Redis, against a local stand-in for the
Slack Web API (tests/support/slack_api.py: conversations.replies, users.info, files served at
their url_private_download) and a scripted OpenAI-compatible model server (both in this process).

Each round asks the same question twice, in turn order swapped every round:
- **bare** (the floor): a top-level mention, no thread: nothing to read before the model;
- **context**: a mention in a thread of `--messages` earlier messages (default 200, from 20
  people, the root a stack trace) with a `--log-mb` (default 1) log attached to the root: the
  worker reads the thread (2 pages), the authors' names, downloads the log, redacts and fits it
  all, reads the trace's frames through the tools, then asks the model.

Measured per question: from the signed delivery sent to the model's first request read. Printed:
medians, the ratio context ÷ bare (goal ≤ 1.3), and what the first request held (so a context
that silently did not arrive cannot pass).

    .venv/bin/python bench/context.py [--rounds 10] [--messages 200] [--log-mb 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.slack_ack import free_port, wait_healthy  # noqa: E402
from config.settings import load_settings  # noqa: E402
from tests.support.e2e import DEFAULT_FILES  # noqa: E402
from tests.support.fixture_repos import make_repo  # noqa: E402
from tests.support.model_replies import answers_after_reading  # noqa: E402
from tests.support.model_server import ScriptedModel  # noqa: E402
from tests.support.slack_api import SlackAPI, event_body, mention, signed_post  # noqa: E402
from worker.jobs.runtime import build_runtime  # noqa: E402
from worker.ops.redis_connection import connect, stop_embedded_server  # noqa: E402

SECRET = "bench-signing-secret"
GOAL_RATIO = 1.3  # issue 32: at most 1.3x the same question without context
QUESTION = "why does this fail?"
TRACE = (
    "prod is failing since the deploy:\n```Traceback (most recent call last):\n"
    '  File "/srv/app/payments/retry.py", line 9, in retry\n'
    "    raise PaymentDeclined(code)\nPaymentDeclined: card_expired```"
)
ANSWERED_SECONDS = 120.0  # a hang guard per question, never a measurement


def log_bytes(megabytes: float) -> bytes:
    """A service log of about `megabytes` MB: request lines, a few warnings, the trace at its end."""
    rng = random.Random(32)
    lines: list[str] = []
    size, target = 0, int(megabytes * 1_000_000)
    while size < target:
        n = len(lines)
        level = "WARN" if n % 97 == 0 else "INFO"
        line = (
            f"2026-12-07T10:{n // 60 % 60:02d}:{n % 60:02d}Z {level} payments[{n % 8}] "
            f"request id={rng.getrandbits(64):016x} path=/v1/charges status=200 in {rng.random():.3f}s"
        )
        lines.append(line)
        size += len(line) + 1
    return ("\n".join(lines) + "\n" + TRACE.strip("`")).encode()


def seed_thread(api: SlackAPI, messages: int, log: bytes) -> str:
    root = {"user": "U000", "text": TRACE, "files": [api.file("payments.log", log)]}
    replies = [
        {"user": f"U{n % 20:03d}", "text": f"message {n}: saw it again on node {n % 8}, retried by hand"}
        for n in range(1, messages)
    ]
    api.users.update({f"U{n:03d}": f"Person {n}" for n in range(20)})
    return api.seed_thread("C1", [root, *replies])


def ask(api: SlackAPI, model: ScriptedModel, url: str, ts: str, thread: str | None) -> tuple[float, str]:
    """Seconds from the mention sent to the model's first request; the first request's text.
    Each question is another person's (one person's would meet the per-user rate limit)."""
    before = len(model.requests)
    started = time.monotonic()
    signed_post(
        url,
        event_body(mention("C1", ts, QUESTION, user="UASK" + ts.replace(".", ""), thread_ts=thread)),
        SECRET,
    )
    model.wait_for_requests(before + 1, timeout=ANSWERED_SECONDS)
    seconds = time.monotonic() - started
    first = json.dumps(model.requests[before]["messages"])
    deadline = time.monotonic() + ANSWERED_SECONDS  # let the answer post before the next question
    while not [
        c
        for c in api.calls_to("reactions.add")
        if c.body.get("timestamp") == ts and c.body.get("name") != "eyes"
    ]:
        if time.monotonic() > deadline:
            raise SystemExit(f"question {ts} was not answered")
        time.sleep(0.02)
    return seconds, first


def start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "codebot.cli", *command], env=env, cwd=ROOT, stdout=out, stderr=out
        )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--log-mb", type=float, default=1.0)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="codebot-bench-context-"))
    make_repo(work / "payments-src", DEFAULT_FILES)
    repos = work / "repos.toml"
    repos.write_text(f'[[repo]]\nname = "payments"\nurl = "{work / "payments-src"}"\n')
    api, model = SlackAPI(), ScriptedModel(default=answers_after_reading("It is the retry's last attempt."))
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CODEBOT_", "SLACK_", "REDIS_URL", "OPENAI_"))
        },
        "SLACK_BOT_TOKEN": "xoxb-bench",
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": api.url,
        "OPENAI_API_KEY": "bench",
        "OPENAI_BASE_URL": model.base_url,
        "CODEBOT_DATA_DIR": str(work / "data"),
        "CODEBOT_REPOS_FILE": str(repos),
        "CODEBOT_SLACK_STREAMING": "false",
    }
    settings = load_settings(env_file=None, data_dir=work / "data", repos_file=repos)
    redis = connect(settings)  # the embedded server both processes share
    assert build_runtime(settings).mirrors.sync("payments").ok
    port = free_port()
    adapter = start(["slack", "--port", str(port)], env, work / "adapter.log")
    worker = start(["worker"], env, work / "worker.log")
    url = f"http://127.0.0.1:{port}/slack/events"
    try:
        wait_healthy(f"http://127.0.0.1:{port}/health")
        thread = seed_thread(api, args.messages, log_bytes(args.log_mb))
        ask(api, model, url, "1700000000.000000", None)  # warm-up: the worker's first job loads its code
        bare: list[float] = []
        context: list[float] = []
        held: list[bool] = []
        for n in range(args.rounds):
            order = [("bare", None), ("context", thread)]
            for kind, in_thread in order if n % 2 == 0 else reversed(order):
                seconds, first = ask(
                    api, model, url, f"1700000001.{2 * n + (kind == 'context'):06d}", in_thread
                )
                if kind == "bare":
                    bare.append(seconds)
                else:
                    context.append(seconds)
                    held.append(
                        "PaymentDeclined" in first and "payments.log" in first and "MAX_ATTEMPTS" in first
                    )
        ratio = statistics.median(context) / statistics.median(bare)
        report: dict[str, Any] = {
            "rounds": args.rounds,
            "thread_messages": args.messages,
            "log_bytes": int(args.log_mb * 1_000_000),
            "bare_median_ms": round(statistics.median(bare) * 1000, 1),
            "context_median_ms": round(statistics.median(context) * 1000, 1),
            "context_max_ms": round(max(context) * 1000, 1),
            "ratio_median": round(ratio, 2),
            "first_request_held_trace_log_and_frame_lines": f"{sum(held)} of {len(held)}",
            "load_1min": round(os.getloadavg()[0], 2),
        }
        print(json.dumps(report, indent=2))
        checks = {
            f"context ÷ bare ≤ {GOAL_RATIO}": ratio <= GOAL_RATIO,
            "every first request held the trace, the log and the frame's lines": all(held),
        }
        for check, passed in checks.items():
            print(f"{'PASS' if passed else 'FAIL'}: {check}")
        return 0 if all(checks.values()) else 1
    finally:
        for process in (adapter, worker):
            process.send_signal(signal.SIGTERM)
        for process in (adapter, worker):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        api.close()
        model.close()
        redis.close()
        stop_embedded_server(settings)


if __name__ == "__main__":
    sys.exit(main())
