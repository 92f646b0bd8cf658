"""Fault bench: questions asked through real processes while a fault is injected; nobody left silent?

Every scenario runs the real thing on loopback: `codebot slack --port N` (HTTP mode) fed signed
Events API deliveries (or, for the Discord scenarios, `codebot discord` on the fake Discord's
gateway, fed MESSAGE_CREATE mentions), one `codebot worker --concurrency C` with its
housekeeper, the scripted model (two turns of `--turn-seconds` each: a read_file call, then a
cited answer), the fake Slack Web API (or fake Discord REST) and the embedded Redis (or a
Sentinel group: primary, replica, three sentinels). Questions are asked at a steady rate for
`--send-seconds`; the fault starts `--fault-at` seconds in and lasts the scenario's
`fault_seconds`. The bench then waits until every question has settled (or `--settle-seconds`
passed) and sorts each thread (sent = the questions asked):

- answered once: exactly one message, the answer read from code (its cited line linked at the
  commit), with ✅ (and 👀 gone);
- answered twice: more than one final message (answer, apology, …) in one thread. Must be 0;
- lost: nothing, or a "Looking into the code…" placeholder never replaced. Must be 0;
- not an answer: one message saying no code was read, with ⚠️ (the model wrote prose, or
  every call it made failed);
- not an answer counted as answered: ✅ on anything but a whole answer read from code (prose,
  a cut-off reply), or the model's prose posted at all. Must be 0;
- cut off: one message with the "Cut off" note and what there was, with ⚠️;
- apologised: one message, an apology with a reference (⚠️);
- told to try again: the one message is "my queue (Redis) is unreachable / refuses writes".

Scenarios about the end of a job also count, among the questions that settled, the records lost
(no record in the console's list, or an answer without its 👍/👎 context), and the SIGTERM
scenarios the late exits (a `codebot worker` that took longer than LATE_EXIT_SECONDS to exit
after a warm shutdown whose questions take a few seconds).

It also notes how long each asker waited (asking to the thread's outcome) and prints the median
and the longest wait of each scenario as a ratio against the fault-free baseline of the same
platform (`baseline`, `baseline-discord`), run first in the same invocation (`--no-baseline`
skips it).

    .venv/bin/python bench/faults.py                       # every scenario
    .venv/bin/python bench/faults.py redis-stall redis-kill --questions 40
    .venv/bin/python bench/faults.py slack-500 discord-500 worker-killed-in-window
    .venv/bin/python bench/faults.py model-prose model-made-up-repos model-stream-cut
    .venv/bin/python bench/faults.py redis-kill-at-job-end sigterm-threads sigterm-fork

Adding a scenario: subclass Scenario (its `env`, `redis`, `inject` and `recover` hooks) and add
it to SCENARIOS (`platform = "discord"` for one on Discord). The fake Slack API has outages
(`bench.api.outage("http500" | "ratelimited" | "429")`, `fail`, `rate_limit`, `hang`), the fake
Discord too (`bench.discord.outage(500)`), the model handler can be replaced (`model_reply`),
any process can be signalled (`bench.worker`, `bench.adapter`); results go to
bench/RESULTS.md, "Fault bench". A scenario whose dependency is missing says so (`needs`) and
is skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
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

from bench.slack_ack import free_port, start_codebot, wait_healthy  # noqa: E402
from bot import texts  # noqa: E402
from bot.slack.format import format_for_slack  # noqa: E402
from config.settings import load_settings  # noqa: E402
from tests.support.e2e import DEFAULT_FILES  # noqa: E402
from tests.support.fake_discord import FakeDiscord  # noqa: E402
from tests.support.fixture_repos import make_repo  # noqa: E402
from tests.support.model_server import (  # noqa: E402
    Reply,
    ScriptedModel,
    cut_stream,
    last_user_text,
    slow,
    text,
    tool_calls,
)
from tests.support.redis_outage import kill_embedded_server  # noqa: E402
from tests.support.redis_servers import SentinelGroup, persist_now, sentinel_group  # noqa: E402
from tests.support.slack_api import Outage, SlackAPI, event_body, mention, signed_post  # noqa: E402
from worker.jobs.feedback import ANSWER_KEY_PREFIX  # noqa: E402
from worker.jobs.question_log import recent_questions  # noqa: E402
from worker.jobs.runtime import build_runtime  # noqa: E402
from worker.ops.embedded_redis import EmbeddedServer  # noqa: E402
from worker.ops.redis_connection import (  # noqa: E402
    SOCKET_TIMEOUT_SECONDS,
    connect,
    server_pid,
    stop_embedded_server,
)
from worker.repos.refresh import REPO_KEY_PREFIX  # noqa: E402

SECRET = "faults-signing-secret"
CHANNEL = "CFAULT"
OUTCOMES = (
    "answered once",
    "answered twice",
    "lost",
    "not an answer",
    "not an answer counted as answered",
    "cut off",
    "apologised",
    "told to try again",
)
MUST_BE_ZERO = ("answered twice", "lost", "not an answer counted as answered")
EXTRA_COUNTS = ("records lost", "late exits")  # must be 0 too, where a scenario counts them
NO_CODE_READ = "No code was read"  # worker/jobs/texts.py, in every not-an-answer reply
CUT_OFF = "Cut off:"  # worker/jobs/texts.py CUT_OFF_NOTE, as Slack and Discord show it
TRY_AGAIN = [  # what a try-again reply reads as, on Slack (mrkdwn) and on Discord (as written)
    *(format_for_slack(t) for t in (texts.QUEUE_UNAVAILABLE, texts.QUEUE_REFUSES_WRITES)),
    [texts.QUEUE_UNAVAILABLE],
    [texts.QUEUE_REFUSES_WRITES],
]


def asked_in(body: dict[str, Any]) -> str:
    """The question of a request: its first user message after the system prompt (a re-ask
    to read code comes later as another user message)."""
    users = [m for m in body["messages"] if m["role"] == "user"]
    return str(users[0]["content"]) if users else last_user_text(body)


class Bench:
    """The processes and fakes of one scenario run."""

    def __init__(self, args: argparse.Namespace, work: Path, scenario: Scenario) -> None:
        self.args = args
        self.work = work
        self.scenario = scenario
        self.api = SlackAPI()
        self.discord = FakeDiscord().start() if scenario.platform == "discord" else None
        self.model = ScriptedModel(scenario.model_reply(args.turn_seconds))
        make_repo(work / "payments-src", DEFAULT_FILES)
        self.repos = work / "repos.toml"
        self.repos.write_text(
            f'[[repo]]\nname = "payments"\nurl = "{work / "payments-src"}"\n'
            'web_url = "https://github.com/acme/payments"\n'
        )
        self.data_dir = work / "data"
        self.sentinels: SentinelGroup | None = None
        self.processes: list[subprocess.Popen[bytes]] = []
        self.asked: dict[str, int] = {}  # message ts (Discord: message id) -> question number
        self.asked_at: dict[str, float] = {}  # message ts -> when it was asked (monotonic)
        self.settled_after: dict[str, float] = {}  # message ts -> seconds from asking to its outcome
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
            **(
                {"DISCORD_BOT_TOKEN": "faults-token", "DISCORD_API_URL": self.discord.base_url}
                if self.discord
                else {}
            ),
            **self.scenario.env(self),
        }

    def start(self, *command: str, name: str) -> subprocess.Popen[bytes]:
        process = start_codebot(*command, log_path=self.work / f"{name}.log", env=self.env(), append=True)
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
        if self.discord is not None:
            discord = self.discord
            self.adapter = self.start("discord", name="discord")
            discord.wait_for(lambda: discord.gateway_sessions, timeout=60)
            time.sleep(3.0)  # READY, then GUILD_CREATE and discord.py's wait for more guilds (2 s)
        else:
            port = free_port()
            self.adapter = self.start("slack", "--port", str(port), name="slack")
            self.events_url = f"http://127.0.0.1:{port}/slack/events"
            wait_healthy(f"http://127.0.0.1:{port}/health")
            warm = {"type": "reaction_added", "user": "U0", "reaction": "x", "item": {}, "event_ts": "1.0"}
            signed_post(self.events_url, event_body(warm), SECRET)  # bolt's one-off auth.test
        self.start_worker()
        self.model_requests_before = len(self.model.requests)

    def start_worker(self) -> None:
        concurrency = ("--concurrency", str(self.args.concurrency))
        self.worker = self.start("worker", *concurrency, *self.scenario.worker_args(), name="worker")

    def note(self, what: str) -> None:
        self.events.append((round(time.monotonic() - self.started, 1), what))

    # --- traffic -------------------------------------------------------------------------------

    def ask(self, n: int) -> None:
        if self.discord is not None:
            bot = self.discord.bot_user
            asked_at = time.monotonic()
            asked = self.discord.message_create(f"<@{bot['id']}> fault question {n}?", mentions=[bot])
            self.asked_at[asked["id"]] = asked_at
            self.asked[asked["id"]] = n
            return
        ts = f"1730000000.{n:06d}"
        self.asked_at[ts] = time.monotonic()
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

    def thread(self, ts: str) -> tuple[list[str], list[str]]:
        """What the asker sees: the bot's messages for the question, and the reactions on it."""
        if self.discord is None:
            return self.api.thread_texts(CHANNEL, ts), self.api.reactions(CHANNEL, ts)
        fake = self.discord
        replies = [  # the answer thread, or replies to the question in the channel
            m
            for m in fake.posted(ts) + fake.posted(fake.channel_id)
            if m["channel_id"] == ts or (m.get("message_reference") or {}).get("message_id") == ts
        ]
        reactions: list[str] = []
        for method, _channel, message, emoji in list(fake.reactions):
            if message == ts and method == "PUT" and emoji not in reactions:
                reactions.append(emoji)
            elif message == ts and method == "DELETE" and emoji in reactions:
                reactions.remove(emoji)
        return [m["content"] for m in replies], [DISCORD_REACTIONS.get(r, r) for r in reactions]

    @staticmethod
    def message_kind(message: str, n: int) -> str:
        """What one bot message in question n's thread is (progress and placeholders: "other")."""
        if CUT_OFF in message:
            return "cut off"
        if NO_CODE_READ in message:
            return "not an answer"
        if f"guess for: fault question {n}?" in message:
            return "prose"  # the model's reply without code read, passed on as it was
        if f"answer to: fault question {n}?" in message and "/payments/retry.py#L3" in message:
            return "answer"  # its citation verified, so linked: a tool showed that line
        if "Reference: `" in message:
            return "apology"
        return "other"

    def outcome(self, ts: str) -> str:
        posted, reactions = self.thread(ts)
        n = self.asked[ts]
        finals = [kind for kind in (self.message_kind(t, n) for t in posted) if kind != "other"]
        checked, warned = "white_check_mark" in reactions, "warning" in reactions
        if len(finals) > 1:
            return "answered twice"
        if "prose" in finals or (checked and (len(posted) != 1 or finals != ["answer"])):
            return "not an answer counted as answered"  # ✅ on anything but one whole code-read answer
        if len(posted) == 1 and finals == ["answer"] and checked and "eyes" not in reactions:
            return "answered once"
        if posted in TRY_AGAIN:
            return "told to try again"
        if len(posted) == 1 and finals and finals[0] != "answer" and (warned or finals == ["apology"]):
            return "apologised" if finals == ["apology"] else finals[0]
        return "lost"

    def settled(self) -> bool:
        return all(self.outcome(ts) != "lost" for ts in list(self.asked))

    def records_lost(self, outcomes: dict[str, str]) -> int:
        """Questions that ended (answered, or told why not) without their record in the
        console's list, or answered without what a 👍/👎 on the answer is filed with."""
        redis = connect(self.settings())
        records = {str(r.get("message")): r for r in recent_questions(redis)}
        ended = ("answered once", "not an answer", "cut off", "apologised")
        lost = 0
        for ts, outcome in outcomes.items():
            record = records.get(ts)
            if outcome not in ended:
                continue
            if record is None or (
                outcome == "answered once" and not redis.exists(ANSWER_KEY_PREFIX + str(record["id"]))
            ):
                lost += 1
        return lost

    def watch(self, stop: threading.Event) -> None:
        """Note when each question first stops being lost: the seconds the asker waited."""
        while not stop.wait(0.5):
            for ts in list(self.asked):
                if ts not in self.settled_after and self.outcome(ts) != "lost":
                    self.settled_after[ts] = round(time.monotonic() - self.asked_at[ts], 1)

    def run(self) -> dict[str, Any]:
        with self.scenario.redis(self):
            self.start_everything()
            self.started = time.monotonic()
            sender = threading.Thread(target=self.send_all)
            sender.start()
            stop_watching = threading.Event()
            watcher = threading.Thread(target=self.watch, args=(stop_watching,), daemon=True)
            watcher.start()
            time.sleep(self.args.fault_at)
            self.note(f"fault: {self.scenario.name}")
            self.scenario.inject(self)
            self.note("fault injected")
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
            stop_watching.set()
            watcher.join()
            return self.report()

    def report(self) -> dict[str, Any]:
        outcomes = {ts: self.outcome(ts) for ts in self.asked}
        counts = Counter(outcomes.values())
        waits = sorted(self.settled_after[ts] for ts in outcomes if ts in self.settled_after)
        return {
            "scenario": self.scenario.name,
            "fault": self.scenario.describe,
            "sent": len(self.asked),
            **{name: counts.get(name, 0) for name in OUTCOMES},
            "records lost": self.records_lost(outcomes) if self.scenario.checks_records else None,
            "late exits": self.scenario.late_exits(),
            "exits": self.scenario.exits(),
            "wait_p50_seconds": waits[len(waits) // 2] if waits else None,
            "wait_max_seconds": waits[-1] if waits else None,
            "lost_examples": [self.asked[ts] for ts, o in sorted(outcomes.items()) if o == "lost"][:10],
            "not_once_seen": {  # what the asker sees in each thread that went wrong
                self.asked[ts]: dict(zip(("messages", "reactions"), self.thread(ts), strict=True))
                for ts, o in sorted(outcomes.items())
                if o in MUST_BE_ZERO
            },
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
        if self.discord is not None:
            self.discord.close()
        self.model.close()


# --- scenarios ---------------------------------------------------------------------------------


class Scenario:
    name: ClassVar[str] = ""
    describe: ClassVar[str] = ""
    fault_seconds: ClassVar[float] = 0.0
    platform: ClassVar[str] = "slack"  # or "discord": `codebot discord` on the fake gateway
    checks_records: ClassVar[bool] = False  # count the records lost (Bench.records_lost)

    @classmethod
    def needs(cls) -> str | None:
        """What this scenario needs that is not there yet (it is then skipped), or None."""
        return None

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
            return slow(turn_seconds, text(f"answer to: {asked_in(body)} [payments:payments/retry.py#L3]"))

        return answer

    def worker_args(self) -> list[str]:
        """Extra arguments of `codebot worker` (after --concurrency)."""
        return []

    def late_exits(self) -> int | None:
        """Workers that exited late (None: this scenario does not stop workers)."""
        return None

    def exits(self) -> list[float] | None:
        """Seconds each stopped worker took to exit, if this scenario stops workers."""
        return None

    def inject(self, bench: Bench) -> None:
        raise NotImplementedError

    def recover(self, bench: Bench) -> None:
        """Undo the fault after fault_seconds (nothing, for a fault that heals by itself)."""


class Baseline(Scenario):
    name = "baseline"
    describe = "no fault: the waits every other Slack scenario is compared with"

    def inject(self, bench: Bench) -> None:
        pass


class DiscordBaseline(Baseline):
    name = "baseline-discord"
    describe = "no fault: the waits every other Discord scenario is compared with"
    platform = "discord"


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


class RedisKillAtJobEnd(Scenario):
    name = "redis-kill-at-job-end"
    describe = (
        "Slack holds the ✅ of the next 4 answers (each stored and posted: its job at its end); the "
        "embedded Redis is SIGKILLed meanwhile (all written so far on disk) and kept down 5 s, the ✅ let through"
    )
    fault_seconds = 5.0
    checks_records = True
    HELD = 4

    def inject(self, bench: Bench) -> None:
        released = threading.Event()
        for _ in range(self.HELD):
            bench.api.hang("reactions.add", 60.0, containing="white_check_mark", until=released)
        deadline = time.monotonic() + 60
        while len(bench.api.held) < self.HELD and time.monotonic() < deadline:
            time.sleep(0.02)
        settings = bench.settings()
        persist_now(connect(settings))  # what the processes wrote is on disk: nothing lost by Redis itself
        EmbeddedServer.under(settings.data_dir).stopped_mark.touch()  # down until recover, not healed
        self.pid = server_pid(settings)
        kill_embedded_server(settings)
        bench.note(f"Redis pid {self.pid} SIGKILLed with {len(bench.api.held)} answers' ✅ held")
        released.set()

    def recover(self, bench: Bench) -> None:
        connect(bench.settings())  # started again, with its data (as `codebot redis start` would)
        bench.note(f"embedded Redis pid {self.pid} -> {server_pid(bench.settings())}")


class SigtermWorker(Scenario):
    """SIGTERM to every process of `codebot worker` (systemd's KillMode=control-group) TRIES
    times, each with questions in flight; a new worker is started after each exit."""

    pool: ClassVar[str] = "threads"
    TRIES = 20
    LATE_EXIT_SECONDS = 20.0  # its questions take a few seconds; RQ's pubsub wait was 60 s
    checks_records = True
    fault_seconds = 0.0

    def __init__(self) -> None:
        self.stops: list[float] = []

    def worker_args(self) -> list[str]:
        return ["--pool", self.pool]

    def late_exits(self) -> int | None:
        return sum(1 for took in self.stops if took > self.LATE_EXIT_SECONDS)

    def exits(self) -> list[float] | None:
        return self.stops

    def inject(self, bench: Bench) -> None:
        extra = itertools.count(100_000)
        for attempt in range(self.TRIES):
            asked = len(bench.model.requests)
            for _ in range(2):  # questions in flight when the signal lands
                bench.ask(next(extra))
            deadline = time.monotonic() + 120
            while len(bench.model.requests) <= asked and time.monotonic() < deadline:
                time.sleep(0.05)
            signalled = time.monotonic()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(bench.worker.pid, signal.SIGTERM)
            try:
                bench.worker.wait(timeout=180)
            except subprocess.TimeoutExpired:
                bench.note(f"try {attempt}: worker {bench.worker.pid} still running 180 s after SIGTERM")
            self.stops.append(round(time.monotonic() - signalled, 1))
            bench.note(f"try {attempt}: worker {bench.worker.pid} exited {self.stops[-1]} s after SIGTERM")
            bench.start_worker()


class SigtermThreads(SigtermWorker):
    name = "sigterm-threads"
    describe = "SIGTERM to every process of `codebot worker --pool threads` 20 times, questions in flight"


class SigtermFork(SigtermWorker):
    name = "sigterm-fork"
    describe = "SIGTERM to every process of `codebot worker --pool fork` 20 times, questions in flight"
    pool = "fork"


class RedisRefusesWrites(Scenario):
    name = "redis-refuses-writes"
    describe = (
        "embedded Redis's snapshot cannot be written (its directory removed, as on a full or broken disk): "
        "MISCONF on every write for 15 s, then the directory is back and a snapshot succeeds"
    )
    fault_seconds = 15.0

    def inject(self, bench: Bench) -> None:
        self.client = client = connect(bench.settings())  # kept: a new connection is refused now
        self.home = str(client.config_get("dir")["dir"])
        doomed = bench.work / "doomed"
        doomed.mkdir()
        client.config_set("dir", str(doomed))
        doomed.rmdir()
        client.bgsave()
        deadline = time.monotonic() + 30
        while client.info("persistence")["rdb_last_bgsave_status"] != "err" and time.monotonic() < deadline:
            time.sleep(0.05)
        bench.note(f"snapshot failed: {client.info('persistence')['rdb_last_bgsave_status']}")

    def recover(self, bench: Bench) -> None:
        client = self.client
        client.config_set("dir", self.home)
        client.bgsave()
        deadline = time.monotonic() + 30
        while client.info("persistence")["rdb_last_bgsave_status"] != "ok" and time.monotonic() < deadline:
            time.sleep(0.05)
        bench.note(f"snapshot again: {client.info('persistence')['rdb_last_bgsave_status']}")


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


class SlackOutage(Scenario):
    """Every Slack Web API call (or those of `methods`) fails as in one of Slack's outages."""

    kind: ClassVar[Outage] = "http500"
    methods: ClassVar[list[str] | None] = None
    fault_seconds = 60.0

    def inject(self, bench: Bench) -> None:
        bench.api.outage(self.kind, self.methods)

    def recover(self, bench: Bench) -> None:
        bench.api.outage(None)


class Slack500(SlackOutage):
    name = "slack-500"
    describe = "every Slack Web API call answered HTTP 500 (an HTML page) for 60 s"


class SlackRatelimited(SlackOutage):
    name = "slack-ratelimited"
    describe = 'every Slack Web API call answered HTTP 200 {"ok": false, "error": "ratelimited"} for 60 s'
    kind = "ratelimited"


class Slack429(SlackOutage):
    name = "slack-429"
    describe = "every Slack Web API call answered HTTP 429 with Retry-After: 1 for 60 s"
    kind = "429"


class SlackUpdate500(SlackOutage):
    name = "slack-update-500"
    describe = "chat.update alone answered HTTP 500 for 30 s (placeholders posted, answers refused)"
    methods: ClassVar[list[str] | None] = ["chat.update"]
    fault_seconds = 30.0


class Discord500(Scenario):
    name = "discord-500"
    describe = "every Discord REST call answered HTTP 500 for 60 s (discord.py retries each 5 times, 16 s)"
    platform = "discord"
    fault_seconds = 60.0

    def inject(self, bench: Bench) -> None:
        assert bench.discord is not None
        bench.discord.outage(500)

    def recover(self, bench: Bench) -> None:
        assert bench.discord is not None
        bench.discord.outage(None)


class WorkerKilledInWindow(Scenario):
    name = "worker-killed-in-window"
    describe = (
        "Slack holds the first answer's chat.update 30 s; the whole `codebot worker` is SIGKILLed "
        "while it waits (answer stored, not posted); a new worker is started"
    )
    fault_seconds = 0.0
    HOLD_SECONDS = 30.0

    def env(self, bench: Bench) -> dict[str, str]:
        # The window this scenario opens is the placeholder's: the answer stored, its chat.update
        # held. A streamed answer (the default) has no chat.update carrying it: with streaming on,
        # the fault was never injected and the scenario checked nothing.
        return {**super().env(bench), "CODEBOT_SLACK_STREAMING": "false"}

    def inject(self, bench: Bench) -> None:
        bench.api.hang("chat.update", self.HOLD_SECONDS, containing="answer to:")
        deadline = time.monotonic() + 60
        while not bench.api.held:
            if time.monotonic() > deadline:
                bench.note("no answer reached chat.update in 60 s: nothing killed")
                return
            time.sleep(0.02)
        os.killpg(bench.worker.pid, signal.SIGKILL)  # the worker, its horses, its housekeeper
        bench.note(f"worker {bench.worker.pid} SIGKILLed with an answer stored and its post held")
        bench.start_worker()
        bench.note(f"new worker {bench.worker.pid}")


class TricklingModel(Scenario):
    name = "trickling-model"
    describe = (
        "for 60 s the model trickles its reply one byte every 2 s; each attempt is cut at "
        "CODEBOT_MODEL_TIMEOUT_SECONDS=10, the question at CODEBOT_QUESTION_DEADLINE_SECONDS=40"
    )
    fault_seconds = 60.0

    def __init__(self) -> None:
        self.trickling = threading.Event()

    @classmethod
    def needs(cls) -> str | None:
        try:
            from tests.support.model_server import trickle  # noqa: F401
        except ImportError:
            return "needs issue 14 (each model attempt's total-time bound) on main"
        return None

    def env(self, bench: Bench) -> dict[str, str]:
        return {
            **super().env(bench),
            "CODEBOT_MODEL_TIMEOUT_SECONDS": "10",
            "CODEBOT_QUESTION_DEADLINE_SECONDS": "40",
        }

    def model_reply(self, turn_seconds: float) -> Any:
        from tests.support.model_server import trickle

        answer = super().model_reply(turn_seconds)

        def maybe_trickling(body: dict[str, Any]) -> Reply:
            reply: Reply = answer(body)
            return trickle(2.0, reply) if self.trickling.is_set() else reply

        return maybe_trickling

    def inject(self, bench: Bench) -> None:
        self.trickling.set()

    def recover(self, bench: Bench) -> None:
        self.trickling.clear()


class FullDisk(Scenario):
    name = "full-disk"
    describe = (
        "the worker's disk reserve (CODEBOT_DISK_RESERVE_BYTES) is larger than the free space, and "
        "a newer commit is recorded as wanted: every catch-up fetch is refused for lack of space"
    )
    fault_seconds = 0.0

    @classmethod
    def needs(cls) -> str | None:
        try:
            from worker.repos.disk import DiskFull  # noqa: F401
        except ImportError:
            return "needs issue 10 (the disk reserve check) on main"
        return None

    def env(self, bench: Bench) -> dict[str, str]:
        free = shutil.disk_usage(bench.work).free
        return {**super().env(bench), "CODEBOT_DISK_RESERVE_BYTES": str(free + (1 << 30))}

    def inject(self, bench: Bench) -> None:
        source = bench.work / "payments-src"
        (source / "NEWS.md").write_text("a commit no worker can fetch: the disk is full\n")
        git = ["git", "-C", str(source)]
        subprocess.run([*git, "add", "-A"], check=True, capture_output=True)
        subprocess.run([*git, "commit", "-qm", "news"], check=True, capture_output=True)
        sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout
        connect(bench.settings()).hset(
            REPO_KEY_PREFIX + "payments", "sha", sha.strip()
        )  # "refreshed elsewhere"
        bench.note(f"commit {sha.strip()[:7]} recorded as wanted")


class ModelMisbehaves(Scenario):
    """For `fault_seconds` the model misbehaves (`misbehave`); before and after, it reads and answers."""

    fault_seconds = 12.0

    def __init__(self) -> None:
        self.faulty = threading.Event()

    def misbehave(self, body: dict[str, Any], turn_seconds: float, usual: Reply) -> Reply:
        raise NotImplementedError

    def model_reply(self, turn_seconds: float) -> Any:
        answer = super().model_reply(turn_seconds)

        def maybe_misbehaving(body: dict[str, Any]) -> Reply:
            usual: Reply = answer(body)
            return self.misbehave(body, turn_seconds, usual) if self.faulty.is_set() else usual

        return maybe_misbehaving

    def inject(self, bench: Bench) -> None:
        self.faulty.set()

    def recover(self, bench: Bench) -> None:
        self.faulty.clear()


class ModelProse(ModelMisbehaves):
    name = "model-prose"
    describe = (
        "for 12 s the model ignores its tools and writes prose (a chat template that drops them), "
        "also when asked again to read code"
    )

    def misbehave(self, body: dict[str, Any], turn_seconds: float, usual: Reply) -> Reply:
        return slow(turn_seconds, text(f"guess for: {asked_in(body)}"))


class ModelMadeUpRepos(ModelMisbehaves):
    name = "model-made-up-repos"
    describe = (
        "for 12 s every tool call the model makes names a repo that does not exist, then it writes prose"
    )

    def misbehave(self, body: dict[str, Any], turn_seconds: float, usual: Reply) -> Reply:
        if body["messages"][-1]["role"] == "tool" or body.get("tool_choice") == "none":
            return slow(turn_seconds, text(f"guess for: {asked_in(body)}"))
        return slow(turn_seconds, tool_calls(("search", {"pattern": "retry", "repo": "acme-core"})))


class ModelStreamCut(ModelMisbehaves):
    name = "model-stream-cut"
    describe = (
        "for 12 s every streamed answer is cut half-way without a finish reason, alternately with "
        "[DONE] and with the connection closed (tool-call turns are whole)"
    )

    def __init__(self) -> None:
        super().__init__()
        self.cuts = itertools.count()

    def misbehave(self, body: dict[str, Any], turn_seconds: float, usual: Reply) -> Reply:
        if usual.calls:
            return usual
        return cut_stream(usual, done=next(self.cuts) % 2 == 0)


SCENARIOS: dict[str, type[Scenario]] = {
    s.name: s
    for s in (
        Baseline,
        DiscordBaseline,
        RedisStall,
        RedisKill,
        RedisKillAtJobEnd,
        RedisRefusesWrites,
        SentinelFailover,
        Slack500,
        SlackRatelimited,
        Slack429,
        SlackUpdate500,
        Discord500,
        WorkerKilledInWindow,
        TricklingModel,
        FullDisk,
        ModelProse,
        ModelMadeUpRepos,
        ModelStreamCut,
        SigtermThreads,
        SigtermFork,
    )
}
DISCORD_REACTIONS = {"👀": "eyes", "✅": "white_check_mark", "⚠️": "warning"}


def ratio(value: float | None, baseline: float | None) -> str:
    return f"{value / baseline:.1f}×" if value is not None and baseline else "–"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenarios", nargs="*", help=f"of {', '.join(SCENARIOS)} (default: all)")
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--send-seconds", type=float, default=30.0, help="questions are asked over this long")
    parser.add_argument("--fault-at", type=float, default=8.0)
    parser.add_argument("--settle-seconds", type=float, default=180.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--turn-seconds", type=float, default=0.5)
    parser.add_argument(
        "--no-baseline", action="store_true", help="do not first run the fault-free baseline of each platform"
    )
    args = parser.parse_args()
    unknown = [name for name in args.scenarios if name not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    names = list(args.scenarios or SCENARIOS)
    if not args.no_baseline:  # each platform's baseline first, measured in this same run
        platforms = {SCENARIOS[name].platform for name in names}
        baselines = [b.name for b in (Baseline, DiscordBaseline) if b.platform in platforms]
        names = baselines + [name for name in names if name not in baselines]
    reports = []
    for name in names:
        missing = SCENARIOS[name].needs()
        if missing:
            print(json.dumps({"scenario": name, "skipped": missing}), flush=True)
            continue
        work = Path(tempfile.mkdtemp(prefix=f"codebot-faults-{name}-"))
        bench = Bench(args, work, SCENARIOS[name]())
        try:
            reports.append(bench.run())
        finally:
            bench.close()
        reports[-1]["platform"] = SCENARIOS[name].platform
        print(json.dumps(reports[-1], ensure_ascii=False), flush=True)
    baseline = {r["platform"]: r for r in reports if r["scenario"] in (Baseline.name, DiscordBaseline.name)}
    print()
    print(
        "| scenario | sent | "
        + " | ".join(OUTCOMES + EXTRA_COUNTS)
        + " | wait p50 s (× baseline) | wait max s (× baseline) |"
    )
    print("|---|---:|" + "---:|" * (len(OUTCOMES) + len(EXTRA_COUNTS) + 2))
    for r in reports:
        base = baseline.get(r["platform"], {})
        p50, most = r["wait_p50_seconds"], r["wait_max_seconds"]
        print(
            f"| {r['scenario']} | {r['sent']} | "
            + " | ".join(str(r[o]) for o in OUTCOMES)
            + "".join(" | –" if r[o] is None else f" | {r[o]}" for o in EXTRA_COUNTS)
            + f" | {p50} ({ratio(p50, base.get('wait_p50_seconds'))})"
            + f" | {most} ({ratio(most, base.get('wait_max_seconds'))}) |"
        )
    return 0 if all(r[o] in (0, None) for r in reports for o in MUST_BE_ZERO + EXTRA_COUNTS) else 1


if __name__ == "__main__":
    sys.exit(main())
