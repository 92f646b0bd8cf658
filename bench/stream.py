"""Time to first visible text, and Web API calls per answer: streamed/edited answers vs the
post-at-the-end path, on Slack and Discord.

Everything real but the platforms and the model, as in bench/load.py: `codebot slack --port N`
(HTTP mode), `codebot discord` on the fake Discord's gateway, `codebot worker`s giving
`--workers x --concurrency` RQ workers (default 2 x 10 = 20 questions at once), the embedded
Redis, the fake Slack Web API and the fake Discord REST + gateway on loopback, the scripted model
streaming its answer in 5-character pieces `--pace` seconds apart after `--think` seconds
(each question: one read_file turn, then a cited ~330-character answer).

Each mode starts every process afresh with its settings:
- `live`: the defaults, CODEBOT_SLACK_STREAMING=true (chat.startStream/appendStream/stopStream)
  and CODEBOT_DISCORD_LIVE_EDITS=true (the progress message edited as the text grows);
- `final` (the baseline, as before issue 13): both false, the answer shown when it is complete.
In each mode, `--rounds` times: 20 Slack mentions at once, wait until all are answered, then 20
Discord mentions at once, wait.

Time to first visible text = from the moment the model server wrote the first piece of an
answer's text (ScriptedModel.first_text_sent) to the first call that put answer text on the
platform (Slack: a `markdown_text` chunk in the question's stream, or a post/update carrying
the answer; Discord: a POST/PATCH of a message in the question's thread carrying it), both on
this machine's monotonic clock. Calls per answer = every Web API / REST call the adapters and
workers made during the mode, divided by the answers (the mentions' acks included).

    .venv/bin/python bench/stream.py [--rounds 3] [--questions 20] [--workers 2] [--concurrency 10]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.load import CHANNEL, SECRET, Load  # noqa: E402
from bench.slack_ack import percentile  # noqa: E402
from tests.support import discord_payloads as payloads  # noqa: E402
from tests.support.model_server import Reply, last_user_text, paced, slow, text, tool_calls  # noqa: E402
from tests.support.slack_api import event_body, mention, signed_post  # noqa: E402

GOAL_P99_SECONDS = 0.5
MARK = "Retries:"  # how every answer starts: text carrying it is the answer, not a progress line
STREAM_METHODS = ("chat.startStream", "chat.appendStream", "chat.stopStream")
QUESTION = re.compile(r"(slack|discord) question \d+")


def model_handler(think: float, pace: float) -> Any:
    def answer(body: dict[str, Any]) -> Reply:
        if body["messages"][-1]["role"] != "tool":
            return slow(think, tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"})))
        asked = QUESTION.search(last_user_text(body))
        return slow(
            think,
            paced(
                pace,
                text(
                    f"{MARK} the payments service retries a failed call up to five times "
                    "[payments:payments/retry.py#L3]. After each ConnectionError it sleeps twice as long "
                    "as before, starting at half a second. When every attempt failed it raises a "
                    "RuntimeError, so the caller sees one clear error instead of a hang "
                    f"(this was {asked.group(0) if asked else 'unknown'})."
                ),
            ),
        )

    return answer


class StreamBench(Load):
    def __init__(self, args: argparse.Namespace, work: Path, live: bool) -> None:
        super().__init__(args, work)
        self.model.set_handler(model_handler(args.think, args.pace))
        flag = "true" if live else "false"
        self.env.update(CODEBOT_SLACK_STREAMING=flag, CODEBOT_DISCORD_LIVE_EDITS=flag)

    def wait_done(self, slack: set[str], discord: set[str]) -> None:
        deadline = time.monotonic() + self.args.timeout
        while time.monotonic() < deadline:
            slack_done, discord_done = self.finished()
            if slack <= slack_done and discord <= discord_done:
                return
            time.sleep(0.2)
        raise SystemExit(f"not answered within {self.args.timeout} s; logs in {self.work}")

    def slack_round(self, first: int) -> None:
        bodies, asked = [], set()
        for n in range(first, first + self.args.questions):
            ts = f"1730000000.{n:06d}"
            self.slack_ts[ts] = n
            asked.add(ts)
            bodies.append(event_body(mention(CHANNEL, ts, f"slack question {n}?", user=f"U{n:05d}")))
        with ThreadPoolExecutor(self.args.questions) as pool:
            list(pool.map(lambda body: signed_post(self.events_url, body, SECRET), bodies))
        self.wait_done(asked, set())

    def discord_round(self, first: int) -> None:
        asked = set()
        for n in range(first, first + self.args.questions):
            message = self.fake.message_create(
                f"<@{self.fake.bot_id}> discord question {n}?",
                author=payloads.user(f"user{n}"),
                mentions=[self.fake.bot_user],
            )
            self.discord_ids[message["id"]] = n
            asked.add(message["id"])
        self.wait_done(set(), asked)

    def measure(self) -> dict[str, Any]:
        self.start_everything()
        slack_from, discord_from = len(self.api.calls), len(self.fake.calls)
        for round_number in range(self.args.rounds):
            first = round_number * self.args.questions
            self.slack_round(first)
            self.discord_round(first)
        time.sleep(1.0)  # a late call, if any, is counted
        token_at = {QUESTION.search(content).group(0): at for at, content in self.model.first_text_sent}  # type: ignore[union-attr]
        slack_calls = [c for c in list(self.api.calls)[slack_from:] if c.method != "auth.test"]
        discord_calls = list(self.fake.calls)[discord_from:]
        slack_delays = [
            self.slack_visible(ts, slack_calls) - token_at[f"slack question {n}"]
            for ts, n in self.slack_ts.items()
        ]
        discord_delays = [
            self.discord_visible(message, discord_calls) - token_at[f"discord question {n}"]
            for message, n in self.discord_ids.items()
        ]
        answers = len(self.slack_ts)
        return {
            "slack": {
                "first_visible_seconds": summary(slack_delays),
                "calls_per_answer": round(len(slack_calls) / answers, 1),
                "calls_by_method": per_answer(Counter(c.method for c in slack_calls), answers),
            },
            "discord": {
                "first_visible_seconds": summary(discord_delays),
                "calls_per_answer": round(len(discord_calls) / answers, 1),
                "calls_by_route": per_answer(
                    Counter(f"{c.method} {re.sub(r'[0-9]{6,}', '{id}', c.path)}" for c in discord_calls),
                    answers,
                ),
            },
        }

    def slack_visible(self, thread: str, calls: list[Any]) -> float:
        mine = {m.ts for m in self.api.thread_messages(CHANNEL, thread)}
        for call in calls:
            body = call.body
            here = body.get("thread_ts") == thread or body.get("ts") in mine
            if not here:
                continue
            if call.method in STREAM_METHODS:
                pieces = [
                    c.get("text", "") for c in body.get("chunks") or [] if c.get("type") == "markdown_text"
                ]
                if any(p.strip() for p in pieces) or (body.get("markdown_text") or "").strip():
                    return float(call.at)
            elif call.method in ("chat.postMessage", "chat.update") and MARK in str(body.get("text")):
                return float(call.at)
        raise SystemExit(f"no answer text seen in Slack thread {thread}")

    def discord_visible(self, question: str, calls: list[Any]) -> float:
        prefix = f"/channels/{question}/messages"
        for call in calls:
            writes = call.path.startswith(prefix) and call.status == 200 and call.method in ("POST", "PATCH")
            if writes and MARK in str((call.body or {}).get("content")):
                return float(call.at)
        raise SystemExit(f"no answer text seen in the Discord thread of {question}")


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": round(statistics.median(values), 3),
        "p90": round(percentile(values, 90), 3),
        "p99": round(percentile(values, 99), 3),
        "max": round(max(values), 3),
    }


def per_answer(counts: Counter[str], answers: int) -> dict[str, float]:
    return {key: round(count / answers, 2) for key, count in counts.most_common()}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--questions", type=int, default=20, help="asked at once, per platform and round")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=10, help="RQ workers per `codebot worker`")
    parser.add_argument("--think", type=float, default=0.5, help="seconds before each model turn starts")
    parser.add_argument("--pace", type=float, default=0.02, help="seconds between streamed 5-char pieces")
    parser.add_argument("--timeout", type=float, default=180)
    args = parser.parse_args()
    # Load's own knobs: the counts size the queue limit; the model handler is replaced
    args.slack = args.discord = args.rounds * args.questions
    args.turn_seconds, args.send_concurrency, args.no_kill = args.think, args.questions, True
    report: dict[str, Any] = {
        "questions_at_once": args.questions,
        "rounds": args.rounds,
        "workers": f"{args.workers} x codebot worker --concurrency {args.concurrency}",
        "model": f"{args.think} s before each turn, then 5-char pieces every {args.pace} s",
    }
    for mode, live in (("final", False), ("live", True)):
        work = Path(tempfile.mkdtemp(prefix=f"codebot-stream-{mode}-"))
        bench = StreamBench(args, work, live)
        try:
            report[mode] = bench.measure()
        finally:
            bench.close()
    for platform in ("slack", "discord"):
        live, final = report["live"][platform], report["final"][platform]
        report[f"{platform}_ratio_live_over_final"] = {
            "first_visible_p50": round(
                live["first_visible_seconds"]["p50"] / final["first_visible_seconds"]["p50"], 2
            ),
            "calls_per_answer": round(live["calls_per_answer"] / final["calls_per_answer"], 2),
        }
    print(json.dumps(report, indent=2, ensure_ascii=False))
    worst = max(report["live"][p]["first_visible_seconds"]["p99"] for p in ("slack", "discord"))
    ok = worst <= GOAL_P99_SECONDS
    print(f"{'PASS' if ok else 'FAIL'}: first visible text p99 {worst:.3f} s (goal <= {GOAL_P99_SECONDS} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
