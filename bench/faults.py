"""Fault bench: questions asked through real processes while a fault is injected; nobody left silent?

Every scenario runs the real thing on loopback: `codebot slack --port N` (HTTP mode) fed signed
Events API deliveries, one `codebot worker --concurrency C`, the scripted model (two turns of
`--turn-seconds` each: a read_file call, then a cited answer), the fake Slack Web API and the
embedded Redis (or a Sentinel group: primary, replica, three sentinels). Questions are asked at
a steady rate for `--send-seconds`; the fault starts `--fault-at` seconds in. The bench then
waits until every question has settled (or `--settle-seconds` passed) and sorts each thread:

- answered once: exactly one message, the answer, with ✅;
- told to try again: the one message is "my queue (Redis) is unreachable / refuses writes";
- apologised: one message, an apology with a reference (⚠️);
- duplicated: more than one answer or apology;
- silent: nothing, or a "Looking into the code…" placeholder never replaced. Must be 0.

    .venv/bin/python bench/faults.py                       # every scenario
    .venv/bin/python bench/faults.py redis-stall redis-kill --questions 40

Adding a scenario: subclass Scenario (its `env`, `redis`, `inject` and `recover` hooks) and add
it to SCENARIOS. The fake Slack API can fail methods (`bench.api.fail`, `rate_limit`), the model
handler can be replaced (`model_reply`), any process can be signalled (`bench.worker`,
`bench.adapter`); results go to bench/RESULTS.md, "Fault bench".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.slack_ack import free_port, wait_healthy  # noqa: E402
from bot import texts  # noqa: E402
from bot.slack_format import format_for_slack  # noqa: E402
from config.settings import load_settings  # noqa: E402
from tests.support.e2e import DEFAULT_FILES, make_git_repo  # noqa: E402
from tests.support.model_server import Reply, ScriptedModel, last_user_text, slow, text, tool_calls  # noqa: E402
from tests.support.redis_outage import kill_embedded_server  # noqa: E402
from tests.support.redis_servers import SentinelGroup, sentinel_group  # noqa: E402
from tests.support.slack_api import SlackAPI, event_body, mention, signed_post  # noqa: E402
from worker.jobs.runtime import build_runtime  # noqa: E402
from worker.ops.redis_connection import (  # noqa: E402
    SOCKET_TIMEOUT_SECONDS,
    connect,
    server_pid,
    stop_embedded_server,
)

SECRET = "faults-signing-secret"
CHANNEL = "CFAULT"
OUTCOMES = ("answered once", "told to try again", "apologised", "duplicated", "silent")
TRY_AGAIN = [format_for_slack(texts.QUEUE_UNAVAILABLE), format_for_slack(texts.QUEUE_REFUSES_WRITES)]


class Bench:
    """The processes and fakes of one scenario run."""

    def __init__(self, args: argparse.Namespace, work: Path, scenario: Scenario) -> None:
        self.args = args
        self.work = work
        self.scenario = scenario
        self.api = SlackAPI()
        self.model = ScriptedModel(scenario.model_reply(args.turn_seconds))
        make_git_repo(work / "payments-src", DEFAULT_FILES)
        self.repos = work / "repos.toml"
        self.repos.write_text(
            f'[[repo]]\nname = "payments"\nurl = "{work / "payments-src"}"\n'
            'web_url = "https://github.com/acme/payments"\n'
        )
        self.data_dir = work / "data"
        self.sentinels: SentinelGroup | None = None
        self.processes: list[subprocess.Popen[bytes]] = []
        self.asked: dict[str, int] = {}  # message ts -> question number
        self.events: list[tuple[float, str]] = []  # (seconds since start, what happened)
        self.started = time.monotonic()

    # --- processes -----------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        ours = ("CODEBOT_", "SLACK_", "DISCORD_", "OPENAI_", "REDIS_")
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith(ours)},
            "CODEBOT_DATA_DIR": str(self.data_dir),
            "CODEBOT_REPOS_FILE": str(self.repos),
            "CODEBOT_QUEUE_MAX_DEPTH": str(self.args.questions * 2),
            "CODEBOT_RATE_LIMIT_QUESTIONS": str(self.args.questions * 2),
            "SLACK_BOT_TOKEN": "xoxb-faults",
            "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": self.api.url,
            "OPENAI_BASE_URL": self.model.base_url,
            "OPENAI_API_KEY": "faults",
            **self.scenario.env(self),
        }

    def start(self, *command: str, name: str) -> subprocess.Popen[bytes]:
        log = open(self.work / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
        process = subprocess.Popen(
            [sys.executable, "-m", "codebot.cli", *command],
            env=self.env(),
            cwd=ROOT,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        self.processes.append(process)
        return process

    def settings(self) -> Any:
        return load_settings(
            env_file=None,
            data_dir=self.data_dir,
            repos_file=self.repos,
            redis_sentinels=self.sentinels.sentinels if self.sentinels else "",
        )

    def start_everything(self) -> None:
        settings = self.settings()
        assert build_runtime(settings).mirrors.sync("payments").ok
        connect(settings)  # the embedded Redis (or the Sentinel primary) answers
        port = free_port()
        self.adapter = self.start("slack", "--port", str(port), name="slack")
        self.events_url = f"http://127.0.0.1:{port}/slack/events"
        wait_healthy(f"http://127.0.0.1:{port}/health")
        warm = {"type": "reaction_added", "user": "U0", "reaction": "x", "item": {}, "event_ts": "1.0"}
        signed_post(self.events_url, event_body(warm), SECRET)  # bolt's one-off auth.test
        self.worker = self.start("worker", "--concurrency", str(self.args.concurrency), name="worker")
        self.model_requests_before = len(self.model.requests)

    def note(self, what: str) -> None:
        self.events.append((round(time.monotonic() - self.started, 1), what))

    # --- traffic -------------------------------------------------------------------------------

    def ask(self, n: int) -> None:
        ts = f"1730000000.{n:06d}"
        self.asked[ts] = n
        body = event_body(mention(CHANNEL, ts, f"fault question {n}?", user=f"U{n:05d}"))
        try:
            signed_post(self.events_url, body, SECRET)
        except OSError as exc:  # the adapter itself is down: Slack would retry; we count it
            self.note(f"question {n}: delivery failed ({exc})")

    def send_all(self) -> None:
        interval = self.args.send_seconds / self.args.questions
        for n in range(self.args.questions):
            due = self.started + n * interval
            time.sleep(max(0.0, due - time.monotonic()))
            threading.Thread(target=self.ask, args=(n,), daemon=True).start()

    # --- the verdict ---------------------------------------------------------------------------

    def outcome(self, ts: str) -> str:
        posted = self.api.thread_texts(CHANNEL, ts)
        reactions = self.api.reactions(CHANNEL, ts)
        n = self.asked[ts]
        answers = [t for t in posted if f"answer to: fault question {n}?" in t]
        apologies = [t for t in posted if "Reference: `" in t and t not in answers]
        if len(answers) + len(apologies) > 1:
            return "duplicated"
        if answers and len(posted) == 1 and "white_check_mark" in reactions:
            return "answered once"
        if posted in TRY_AGAIN:
            return "told to try again"
        if apologies and len(posted) == 1:
            return "apologised"
        return "silent"

    def settled(self) -> bool:
        return all(self.outcome(ts) != "silent" for ts in self.asked)

    def run(self) -> dict[str, Any]:
        with self.scenario.redis(self):
            self.start_everything()
            self.started = time.monotonic()
            sender = threading.Thread(target=self.send_all)
            sender.start()
            time.sleep(self.args.fault_at)
            self.note(f"fault: {self.scenario.name}")
            self.scenario.inject(self)
            time.sleep(self.scenario.fault_seconds)
            self.scenario.recover(self)
            self.note("fault over")
            sender.join()
            self.note("all asked")
            deadline = time.monotonic() + self.args.settle_seconds
            while not self.settled() and time.monotonic() < deadline:
                time.sleep(1.0)
            self.note("settled" if self.settled() else "gave up waiting")
            time.sleep(3.0)  # a duplicate, if any, would arrive now
            return self.report()

    def report(self) -> dict[str, Any]:
        outcomes = {ts: self.outcome(ts) for ts in self.asked}
        counts = Counter(outcomes.values())
        return {
            "scenario": self.scenario.name,
            "fault": self.scenario.describe,
            "questions": len(self.asked),
            **{name: counts.get(name, 0) for name in OUTCOMES},
            "silent_examples": [self.asked[ts] for ts, o in sorted(outcomes.items()) if o == "silent"][:10],
            "timeline": self.events,
            "logs": str(self.work),
        }

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGCONT)  # in case a scenario left one stopped
                    os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        self.api.close()
        self.model.close()


# --- scenarios ---------------------------------------------------------------------------------


class Scenario:
    name: ClassVar[str] = ""
    describe: ClassVar[str] = ""
    fault_seconds: ClassVar[float] = 0.0

    def env(self, bench: Bench) -> dict[str, str]:
        """Extra environment for every codebot process of the run."""
        return {"REDIS_SENTINELS": bench.sentinels.sentinels} if bench.sentinels else {}

    @contextlib.contextmanager
    def redis(self, bench: Bench) -> Iterator[None]:
        """The Redis of the run: the embedded server by default (stopped at the end)."""
        try:
            yield
        finally:
            stop_embedded_server(bench.settings())

    def model_reply(self, turn_seconds: float) -> Any:
        def answer(body: dict[str, Any]) -> Reply:
            if body["messages"][-1]["role"] != "tool":
                return slow(
                    turn_seconds, tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}))
                )
            return slow(
                turn_seconds, text(f"answer to: {last_user_text(body)} [payments:payments/retry.py#L3]")
            )

        return answer

    def inject(self, bench: Bench) -> None:
        raise NotImplementedError

    def recover(self, bench: Bench) -> None:
        """Undo the fault after fault_seconds (nothing, for a fault that heals by itself)."""


class RedisStall(Scenario):
    name = "redis-stall"
    describe = (
        f"embedded Redis SIGSTOPped for 15 s (client read timeout {SOCKET_TIMEOUT_SECONDS:g} s), then SIGCONT"
    )
    fault_seconds = 15.0

    def inject(self, bench: Bench) -> None:
        self.pid = server_pid(bench.settings())
        assert self.pid
        os.kill(self.pid, signal.SIGSTOP)

    def recover(self, bench: Bench) -> None:
        os.kill(self.pid, signal.SIGCONT)


class RedisKill(Scenario):
    name = "redis-kill"
    describe = "embedded Redis SIGKILLed; the running processes start it again (healing)"
    fault_seconds = 5.0

    def inject(self, bench: Bench) -> None:
        self.pid = server_pid(bench.settings())
        kill_embedded_server(bench.settings())

    def recover(self, bench: Bench) -> None:
        bench.note(f"embedded Redis pid {self.pid} -> {server_pid(bench.settings())}")


class SentinelFailover(Scenario):
    name = "sentinel-failover"
    describe = "Sentinel primary SIGKILLed (down-after 1 s, quorum 2 of 3); the replica is promoted"
    fault_seconds = 5.0

    @contextlib.contextmanager
    def redis(self, bench: Bench) -> Iterator[None]:
        with sentinel_group(bench.work) as group:
            bench.sentinels = group
            yield

    def inject(self, bench: Bench) -> None:
        assert bench.sentinels
        bench.sentinels.kill_primary()

    def recover(self, bench: Bench) -> None:
        assert bench.sentinels
        bench.sentinels.wait_for_failover()
        bench.note("replica promoted")


SCENARIOS: dict[str, type[Scenario]] = {s.name: s for s in (RedisStall, RedisKill, SentinelFailover)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenarios", nargs="*", help=f"of {', '.join(SCENARIOS)} (default: all)")
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--send-seconds", type=float, default=30.0, help="questions are asked over this long")
    parser.add_argument("--fault-at", type=float, default=8.0)
    parser.add_argument("--settle-seconds", type=float, default=180.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--turn-seconds", type=float, default=0.5)
    args = parser.parse_args()
    unknown = [name for name in args.scenarios if name not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    reports = []
    for name in args.scenarios or list(SCENARIOS):
        work = Path(tempfile.mkdtemp(prefix=f"codebot-faults-{name}-"))
        bench = Bench(args, work, SCENARIOS[name]())
        try:
            reports.append(bench.run())
        finally:
            bench.close()
        print(json.dumps(reports[-1], ensure_ascii=False), flush=True)
    print()
    print("| scenario | questions | " + " | ".join(OUTCOMES) + " |")
    print("|---|---:|" + "---:|" * len(OUTCOMES))
    for r in reports:
        print(f"| {r['scenario']} | {r['questions']} | " + " | ".join(str(r[o]) for o in OUTCOMES) + " |")
    return 0 if all(r["silent"] == 0 and r["duplicated"] == 0 for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
