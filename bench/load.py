"""Load: 1,000 Slack mentions and 300 Discord mentions, 3 `codebot worker`s, one SIGKILLed halfway.

Everything is a real process or a real server on loopback: `codebot slack --port N` (HTTP
mode) fed signed Events API deliveries, `codebot discord` on the fake Discord's gateway fed
MESSAGE_CREATE dispatches, three `codebot worker --concurrency C` processes with default
settings (heartbeat 5 s + grace 15 s, reaper every 5 s), the scripted model answering every
turn after 0.5 s (a read_file call, then a cited answer), the fake Slack Web API and the
embedded Redis. When half the questions are answered, worker 1 is SIGKILLed with its whole
process group (the worker process holding its questions, and its housekeeper).

Checks: every question ends with exactly one bot message in its thread, which is its answer
(✅, no ⚠️), none lost. Reports ack latency (Slack: the HTTP response; Discord: the 👀 PUT),
how long the killed worker's questions took to be answered again, Redis INFO memory, and the
RSS/PSS of each worker's processes.

    .venv/bin/python bench/load.py [--slack 1000] [--discord 300] [--workers 3] [--concurrency 6]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rq import Worker  # noqa: E402
from rq.job import Job  # noqa: E402
from rq.registry import StartedJobRegistry  # noqa: E402

from bench.slack_ack import free_port, percentile, start_codebot, wait_healthy  # noqa: E402
from codebot.wiring import build_runtime  # noqa: E402
from config.settings import load_settings  # noqa: E402
from tests.support import discord_payloads as payloads  # noqa: E402
from tests.support.e2e import DEFAULT_FILES  # noqa: E402
from tests.support.fake_discord import FakeDiscord  # noqa: E402
from tests.support.fixture_repos import make_repo  # noqa: E402
from tests.support.model_server import Reply, ScriptedModel, last_user_text, slow, text, tool_calls  # noqa: E402
from tests.support.slack_api import SlackAPI, event_body, mention, signed_post  # noqa: E402
from worker.jobs.queue import QUESTIONS_QUEUE, questions_queue  # noqa: E402
from worker.ops.redis_connection import connect, stop_embedded_server  # noqa: E402

SECRET = "load-signing-secret"
CHANNEL = "CLOAD"
DONE, FAILED = {"white_check_mark", "✅"}, {"warning", "⚠️"}


def model_handler(turn_seconds: float) -> Any:
    def answer(body: dict[str, Any]) -> Reply:
        if body["messages"][-1]["role"] != "tool":
            return slow(
                turn_seconds, tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}))
            )
        return slow(turn_seconds, text(f"answer to: {last_user_text(body)} [payments:payments/retry.py#L3]"))

    return answer


def tree(pid: int) -> list[int]:
    """pid and all its descendants."""
    found, frontier = [pid], [pid]
    while frontier:
        out = subprocess.run(
            ["pgrep", "-P", ",".join(map(str, frontier))], capture_output=True, text=True
        ).stdout
        frontier = [int(p) for p in out.split()]
        found += frontier
    return found


def memory_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in kB from /proc/<pid>/smaps_rollup; (0, 0) for a process that is gone."""
    values = {"Rss:": 0, "Pss:": 0}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, *rest = line.split()
            if key in values:
                values[key] = int(rest[0])
    except (OSError, ValueError, IndexError):
        pass
    return values["Rss:"], values["Pss:"]


class Load:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.api = SlackAPI()
        self.model = ScriptedModel(model_handler(args.turn_seconds))
        self.fake = FakeDiscord().start()
        repos = work / "repos.toml"
        make_repo(work / "payments-src", DEFAULT_FILES)
        repos.write_text(
            f'[[repo]]\nname = "payments"\nurl = "{work / "payments-src"}"\n'
            'web_url = "https://github.com/acme/payments"\n'
        )
        self.settings = load_settings(env_file=None, data_dir=work / "data", repos_file=repos)
        assert build_runtime(self.settings).mirrors.sync("payments").ok
        self.redis = connect(self.settings)
        self.env = {
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("CODEBOT_", "SLACK_", "DISCORD_", "OPENAI_"))
            },
            "CODEBOT_DATA_DIR": str(work / "data"),
            "CODEBOT_REPOS_FILE": str(repos),
            "CODEBOT_QUEUE_MAX_DEPTH": str((args.slack + args.discord) * 2),
            "SLACK_BOT_TOKEN": "xoxb-load",
            "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": self.api.url,
            "DISCORD_BOT_TOKEN": "load-token",
            "DISCORD_API_URL": self.fake.base_url,
            "OPENAI_BASE_URL": self.model.base_url,
            "OPENAI_API_KEY": "load",
        }
        self.processes: list[subprocess.Popen[bytes]] = []
        self.workers: list[subprocess.Popen[bytes]] = []
        self.slack_ts: dict[str, int] = {}  # message ts -> question number
        self.discord_ids: dict[str, int] = {}  # message id -> question number
        self.discord_sent_at: dict[str, float] = {}
        self.ack_ms: list[float] = []
        self.peak_redis: dict[str, Any] = {}
        self.peak_depth = 0
        self.peak_pss_kb: dict[int, int] = {}
        self.peak_rss_kb: dict[int, int] = {}
        self.samples_lock = threading.Lock()

    def start(self, *command: str, name: str) -> subprocess.Popen[bytes]:
        process = start_codebot(*command, log_path=self.work / f"{name}.log", env=self.env, append=False)
        self.processes.append(process)
        return process

    def start_everything(self) -> None:
        port = free_port()
        self.start("slack", "--port", str(port), name="slack")
        self.events_url = f"http://127.0.0.1:{port}/slack/events"
        wait_healthy(f"http://127.0.0.1:{port}/health")
        warm = {"type": "reaction_added", "user": "U0", "reaction": "x", "item": {}, "event_ts": "1.0"}
        signed_post(self.events_url, event_body(warm), SECRET)  # bolt's one-off auth.test
        if self.args.discord:
            self.start("discord", name="discord")
            self.fake.wait_for(lambda: self.fake._sockets and self.fake.find("PUT", "commands"), timeout=60)
            time.sleep(1.0)  # GUILD_CREATE handled
        for n in range(self.args.workers):
            self.workers.append(
                self.start("worker", "--concurrency", str(self.args.concurrency), name=f"worker{n + 1}")
            )
        expected = self.args.workers  # one RQ worker per `codebot worker` (threads hold its questions)
        deadline = time.monotonic() + 60
        while len(Worker.all(connection=self.redis)) < expected and time.monotonic() < deadline:
            time.sleep(0.2)

    # --- traffic ---------------------------------------------------------------------------------

    def send_slack(self) -> None:
        bodies = []
        for n in range(self.args.slack):
            ts = f"1730000000.{n:06d}"
            self.slack_ts[ts] = n
            bodies.append(event_body(mention(CHANNEL, ts, f"slack question {n}?", user=f"U{n:05d}")))
        with ThreadPoolExecutor(self.args.send_concurrency) as pool:
            results = list(pool.map(lambda body: signed_post(self.events_url, body, SECRET), bodies))
        self.slack_statuses = sorted({status for status, _, _ in results})
        self.ack_ms = [seconds * 1000 for _, _, seconds in results]

    def send_discord(self) -> None:
        for n in range(self.args.discord):
            author = payloads.user(f"user{n}")
            sent = time.monotonic()
            message = self.fake.message_create(
                f"<@{self.fake.bot_id}> discord question {n}?", author=author, mentions=[self.fake.bot_user]
            )
            self.discord_ids[message["id"]] = n
            self.discord_sent_at[message["id"]] = sent

    # --- watching --------------------------------------------------------------------------------

    def finished(self) -> tuple[set[str], set[str]]:
        """Slack thread ts and Discord message ids that got ✅ or ⚠️."""
        slack = {
            c.body.get("timestamp", "")
            for c in list(self.api.calls)
            if c.method == "reactions.add" and c.body.get("name") in DONE | FAILED
        }
        discord = {
            m
            for method, _c, m, emoji in list(self.fake.reactions)
            if method == "PUT" and emoji in DONE | FAILED
        }
        return slack & set(self.slack_ts), discord & set(self.discord_ids)

    def sample(self) -> None:
        info = self.redis.info("memory")
        depth = questions_queue(self.redis).count
        self.peak_depth = max(self.peak_depth, depth)
        if info["used_memory"] > self.peak_redis.get("used_memory", 0):
            self.peak_redis = {
                k: info[k] for k in ("used_memory", "used_memory_human", "used_memory_rss_human")
            }
            self.peak_redis["queue_depth_then"] = depth
        for index, worker in enumerate(self.workers):
            if worker.poll() is not None:
                continue
            pids = tree(worker.pid)
            usage = [memory_kb(pid) for pid in pids]
            self.peak_pss_kb[index] = max(self.peak_pss_kb.get(index, 0), sum(pss for _, pss in usage))
            self.peak_rss_kb[index] = max(self.peak_rss_kb.get(index, 0), max(rss for rss, _ in usage))

    def kill_worker(self, index: int) -> dict[str, Any]:
        victim = self.workers[index]
        pids = set(tree(victim.pid))
        registry = StartedJobRegistry(QUESTIONS_QUEUE, connection=self.redis)
        in_flight = []
        for job in Job.fetch_many(registry.get_job_ids(cleanup=False), connection=self.redis):
            if job and job.worker_name and any(f"-{pid}-" in job.worker_name for pid in pids):
                in_flight.append(str(job.meta["target"]["message"]))
        os.killpg(victim.pid, signal.SIGKILL)
        return {"killed_at": time.monotonic(), "in_flight": in_flight}

    def done_at(self, key: str) -> float | None:
        for call in self.api.calls:
            if (
                call.method == "reactions.add"
                and call.body.get("timestamp") == key
                and call.body.get("name") in DONE
            ):
                return call.at
        for call in self.fake.calls:
            if call.method == "PUT" and f"/messages/{key}/reactions/" in call.path and "✅" in call.path:
                return call.at
        return None

    def run(self) -> dict[str, Any]:
        self.start_everything()
        self.redis_before = int(self.redis.info("memory")["used_memory"])
        started = time.monotonic()
        senders = [threading.Thread(target=self.send_slack), threading.Thread(target=self.send_discord)]
        for sender in senders:
            sender.start()
        total, kill = self.args.slack + self.args.discord, None
        deadline = started + self.args.timeout
        while time.monotonic() < deadline:
            self.sample()
            slack_done, discord_done = self.finished()
            done = len(slack_done) + len(discord_done)
            if kill is None and not self.args.no_kill and done >= total // 2:
                kill = self.kill_worker(0)
            if done >= total and not any(s.is_alive() for s in senders):
                break
            time.sleep(0.5)
        elapsed = time.monotonic() - started
        time.sleep(3.0)  # a duplicate answer, if any, would arrive now
        return self.report(elapsed, kill)

    # --- the verdict -----------------------------------------------------------------------------

    def report(self, elapsed: float, kill: dict[str, Any] | None) -> dict[str, Any]:
        # one message in the thread, however it got there (posted, or streamed since issue 13)
        slack_bad = [
            ts
            for ts, n in self.slack_ts.items()
            if len(self.api.thread_messages(CHANNEL, ts)) != 1
            or self.api.thread_texts(CHANNEL, ts) != [self.api.thread_texts(CHANNEL, ts)[0]]
            or f"slack question {n}?" not in self.api.thread_texts(CHANNEL, ts)[0]
            or any(r in FAILED for r in self.api.reactions(CHANNEL, ts))
        ]
        discord_bad = [
            m
            for m, n in self.discord_ids.items()
            if len(self.fake.posted(m)) != 1
            or f"discord question {n}?" not in self.fake.posted(m)[0]["content"]
            or not any(
                method == "PUT" and msg == m and e in DONE for method, _c, msg, e in self.fake.reactions
            )
        ]
        discord_ack = [
            (call.at - self.discord_sent_at[m]) * 1000
            for m in self.discord_ids
            for call in self.fake.find("PUT", f"/messages/{m}/reactions/👀")[:1]
        ]
        recovered = []
        if kill:
            for key in kill["in_flight"]:
                at = self.done_at(key)
                recovered.append(round(at - kill["killed_at"], 1) if at else None)
        return {
            "questions": {"slack": self.args.slack, "discord": self.args.discord},
            "workers": f"{self.args.workers} x codebot worker --concurrency {self.args.concurrency}",
            "model_seconds_per_turn": self.args.turn_seconds,
            "elapsed_seconds": round(elapsed, 1),
            "questions_per_second": round((self.args.slack + self.args.discord) / elapsed, 2),
            "slack_http_statuses": self.slack_statuses,
            "slack_ack_ms": self._latency(self.ack_ms),
            "discord_ack_ms": self._latency(discord_ack),
            "slack_not_exactly_once": len(slack_bad),
            "discord_not_exactly_once": len(discord_bad),
            "bad_examples": (slack_bad + discord_bad)[:5],
            "killed_worker_in_flight": len(kill["in_flight"]) if kill else 0,
            "killed_worker_answered_again_after_seconds": sorted(recovered, key=lambda s: (s is None, s)),
            "queue_depth_peak": self.peak_depth,
            "redis_peak": self.peak_redis,
            "redis_end": {
                k: self.redis.info("memory")[k] for k in ("used_memory_human", "used_memory_peak_human")
            },
            "redis_keys_end": self.redis.dbsize(),
            "redis_bytes_per_question_kept": round(
                (int(self.redis.info("memory")["used_memory"]) - self.redis_before)
                / (self.args.slack + self.args.discord)
            ),
            "worker_peak_pss_mb": {
                f"worker{i + 1}": round(kb / 1024) for i, kb in sorted(self.peak_pss_kb.items())
            },
            "worker_peak_process_rss_mb": {
                f"worker{i + 1}": round(kb / 1024) for i, kb in sorted(self.peak_rss_kb.items())
            },
        }

    @staticmethod
    def _latency(values: list[float]) -> dict[str, float]:
        if not values:
            return {}
        return {
            "p50": round(statistics.median(values), 1),
            "p99": round(percentile(values, 99), 1),
            "max": round(max(values), 1),
        }

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        self.api.close()
        self.model.close()
        self.fake.close()
        stop_embedded_server(self.settings)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--slack", type=int, default=1000)
    parser.add_argument("--discord", type=int, default=300)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=6, help="questions in flight per `codebot worker`")
    parser.add_argument("--turn-seconds", type=float, default=0.5)
    parser.add_argument("--send-concurrency", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=540)
    parser.add_argument("--no-kill", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="codebot-load-"))
    load = Load(args, work)
    try:
        report = load.run()
    finally:
        load.close()
    print(json.dumps(report, indent=2, ensure_ascii=False))
    print(f"logs: {work}")
    ok = report["slack_not_exactly_once"] == 0 and report["discord_not_exactly_once"] == 0
    ok = ok and None not in report["killed_worker_answered_again_after_seconds"]
    print("PASS: every question answered exactly once" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
