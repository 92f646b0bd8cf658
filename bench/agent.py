"""Framework overhead, throughput and memory of the question path (issue 3 benchmarks).

1. Overhead: a zero-latency scripted model doing 4 tool calls on a large corpus (the Python
   standard library committed into a git repo): time from enqueue to final answer, minus the
   time spent inside the model server. Goal: median < 0.3 s.
2. Throughput: a scripted model that takes 1 s per turn, Q questions, `codebot worker
   --concurrency N`: completed per minute as a fraction of the ideal N×60/(turns per question).
   Goal ≥ 0.9.
3. Memory: worker PSS (parent + children + work horses; shared pages split fairly) at its peak
   while N questions run, per question.

Run: .venv/bin/python bench/agent.py [--questions 200] [--concurrency 4 8 16]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from config.settings import load_settings  # noqa: E402
from tests.support.model_server import ScriptedModel, slow, text, tool_calls  # noqa: E402
from worker.jobs import runtime as runtime_module  # noqa: E402
from worker.jobs.question import Question, ReplyTarget, event_identity  # noqa: E402
from worker.jobs.queue import QUESTIONS_QUEUE, enqueue_question  # noqa: E402
from worker.jobs.runtime import build_runtime  # noqa: E402
from worker.jobs.sink import read_console_events  # noqa: E402
from worker.ops.redis_connection import connect, stop_embedded_server  # noqa: E402

TURNS_PER_QUESTION = 3  # two tool rounds and the answer


def build_corpus(tmp: Path) -> Path:
    source = tmp / "stdlib"
    shutil.copytree(
        sysconfig.get_paths()["stdlib"],
        source,
        ignore=shutil.ignore_patterns("__pycache__", "site-packages", "*.pyc"),
    )
    subprocess.run(["git", "init", "-q", "-b", "main", str(source)], check=True)
    subprocess.run(["git", "-C", str(source), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(source), "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "corpus"],
        check=True,
    )
    return source


def write_whitelist(tmp: Path, source: Path) -> Path:
    path = tmp / "repos.toml"
    path.write_text(
        f'[[repo]]\nname = "stdlib"\nurl = "{source}"\nweb_url = "https://github.com/python/cpython"\n'
    )
    return path


def overhead(tmp: Path, repos_file: Path, runs: int) -> list[float]:
    model = ScriptedModel()
    settings = load_settings(
        env_file=None,
        data_dir=tmp / "data-overhead",
        repos_file=repos_file,
        openai_base_url=model.base_url,
        openai_api_key="k",
        model_max_retries=0,
    )
    runtime = build_runtime(settings)
    assert runtime.mirrors.sync("stdlib").ok
    runtime_module.install(runtime)
    redis = connect(settings)
    from rq import Queue, SimpleWorker

    samples = []
    for _ in range(runs + 1):
        model.enqueue(
            tool_calls(("search", {"pattern": "def retry|class Retry", "repo": "stdlib"})),
            tool_calls(
                (
                    "read_file",
                    {"repo": "stdlib", "path": "asyncio/tasks.py", "start_line": 1, "end_line": 200},
                ),
                ("search", {"pattern": "backoff", "repo": "stdlib", "ignore_case": True}),
                ("list_files", {"repo": "stdlib", "path": "asyncio"}),
            ),
            text("It is here [stdlib:asyncio/tasks.py#L1-L20]."),
        )
        question = Question(
            id=event_identity("console", str(time.time_ns())),
            asker="bench",
            target=ReplyTarget(platform="console", channel="bench"),
            text="where is retry?",
            repos=["stdlib"],
        )
        busy_before = model.busy_seconds
        started = time.perf_counter()
        enqueue_question(redis, question, settings)
        SimpleWorker([Queue(QUESTIONS_QUEUE, connection=redis)], connection=redis).work(
            burst=True, logging_level="ERROR"
        )
        events = list(read_console_events(redis, question.id, 30, poll_ms=10))
        elapsed = time.perf_counter() - started
        assert events and events[-1][0] == "answer", events
        model_time = model.busy_seconds - busy_before  # time inside the model server
        samples.append(elapsed - model_time)
    model.close()
    stop_embedded_server(settings)
    return samples[1:]  # the first run warms the page cache and imports


def pss_kib(pid: int) -> int:
    total = 0
    pids = [pid]
    while pids:
        current = pids.pop()
        try:
            # PSS, not RSS: forked workers share copy-on-write pages that RSS would count N times
            with open(f"/proc/{current}/smaps_rollup") as handle:
                total += next(int(line.split()[1]) for line in handle if line.startswith("Pss:"))
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except (OSError, StopIteration):
            continue
        pids.extend(int(c) for c in children)
    return total


def throughput(tmp: Path, repos_file: Path, questions: int, concurrency: int) -> dict[str, Any]:
    def answer(body: dict[str, Any]) -> Any:
        rounds = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if rounds < TURNS_PER_QUESTION - 1:
            return slow(
                1.0, tool_calls(("search", {"pattern": "def main", "repo": "stdlib", "glob": "asyncio/*.py"}))
            )
        return slow(1.0, text("done [stdlib:asyncio/__main__.py#L1]"))

    model = ScriptedModel(answer)
    data_dir = tmp / f"data-{concurrency}"
    settings = load_settings(
        env_file=None,
        data_dir=data_dir,
        repos_file=repos_file,
        openai_base_url=model.base_url,
        openai_api_key="k",
    )
    runtime = build_runtime(settings)
    assert runtime.mirrors.sync("stdlib").ok
    redis = connect(settings)
    ids = []
    for i in range(questions):
        question = Question(
            id=event_identity("console", f"tp{concurrency}-{i}"),
            asker="bench",
            target=ReplyTarget(platform="console", channel="bench"),
            text=f"q{i}",
            repos=["stdlib"],
        )
        enqueue_question(redis, question, settings)
        ids.append(question.id)
    env = {
        **os.environ,
        "CODEBOT_DATA_DIR": str(data_dir),
        "CODEBOT_REPOS_FILE": str(repos_file),
        "OPENAI_BASE_URL": model.base_url,
        "OPENAI_API_KEY": "k",
    }
    started = time.perf_counter()
    worker = subprocess.Popen(
        [sys.executable, "-m", "codebot.cli", "worker", "--burst", "--concurrency", str(concurrency)],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    peak = [0]

    def sample() -> None:
        while worker.poll() is None:
            peak[0] = max(peak[0], pss_kib(worker.pid))
            time.sleep(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    worker.wait()
    elapsed = time.perf_counter() - started
    sampler.join()
    answered = sum(
        1 for qid in ids if any(k == "answer" for k, _ in read_console_events(redis, qid, 1, poll_ms=10))
    )
    model.close()
    stop_embedded_server(settings)
    ideal = concurrency * 60 / TURNS_PER_QUESTION
    per_minute = answered / elapsed * 60
    return {
        "concurrency": concurrency,
        "answered": answered,
        "seconds": elapsed,
        "per_minute": per_minute,
        "ideal": ideal,
        "ratio": per_minute / ideal,
        "peak_rss_mib": peak[0] / 1024,
        "rss_per_question_mib": peak[0] / 1024 / concurrency,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--overhead-runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as raw:
        tmp = Path(raw)
        source = build_corpus(tmp)
        repos_file = write_whitelist(tmp, source)
        samples = overhead(tmp, repos_file, args.overhead_runs)
        print(f"machine: {os.cpu_count()} cores; corpus: Python stdlib in a git repo")
        print(
            f"\n### Framework overhead per question (4 tool calls, zero-latency model, {len(samples)} runs)\n"
        )
        print(
            f"median {statistics.median(samples):.3f} s · p90 {sorted(samples)[int(len(samples) * 0.9) - 1]:.3f} s · goal < 0.3 s"
        )
        print("\n### Throughput (1 s per model turn, 3 turns per question)\n")
        print(
            "| concurrency | answered | seconds | per minute | ideal | ratio | peak worker PSS | PSS per question |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for n in args.concurrency:
            r = throughput(tmp, repos_file, args.questions, n)
            print(
                f"| {n} | {r['answered']}/{args.questions} | {r['seconds']:.1f} | {r['per_minute']:.1f} | {r['ideal']:.0f} | "
                f"{r['ratio']:.2f} | {r['peak_rss_mib']:.0f} MiB | {r['rss_per_question_mib']:.0f} MiB |",
                flush=True,
            )


if __name__ == "__main__":
    main()
