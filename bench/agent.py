"""Overhead, throughput and memory of the question path as deployed (issue 3 and 22 benchmarks).

Every part runs `codebot worker` as production does (a subprocess; `--pool threads` unless
`--pool fork`), never an in-process SimpleWorker, and prints ratios to a floor measured in the
same run:

1. Overhead: a zero-latency scripted model doing 4 tool calls (two whole-corpus searches, a
   read, a listing) on a large corpus (the Python standard library in a git repo), answered by
   a warm `codebot worker`: time from enqueue to the final answer minus the time inside the
   model server (from each request's first line read to its reply's last byte written), ÷ the
   two searches as raw `rg` (the floor), run right after each question, under its conditions.
   The ratio is median to median (like to like); the ratio to the best floor is printed too.
   Goal ≤ 1.5×. The worker's own CPU and ripgrep's per question come from /proc.
2. Throughput: a scripted model taking 1 s per turn, 3 turns, Q questions, `codebot worker
   --concurrency N`: answered per minute (from the first model request to the last answer, so
   start-up is not counted) ÷ the ideal N×60/3. Goal ≥ 0.8 at N = 32 and 64. CPU seconds per
   question are the worker tree's user+system time ÷ questions.
3. Memory: the worker's whole process tree's PSS (shared pages split fairly) at its peak while
   N questions are in flight, ÷ N: PSS per in-flight question. Goal ≤ 10 MiB at N = 32.

Run: .venv/bin/python bench/agent.py [--questions 200] [--concurrency 8 32 64] [--pool threads|fork]
(`--concurrency` with no values: the overhead only, for quick iterations)
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from config.settings import load_settings  # noqa: E402
from tests.support.model_server import ScriptedModel, slow, text, tool_calls  # noqa: E402
from worker.jobs.question import Question, ReplyTarget, event_identity  # noqa: E402
from worker.jobs.queue import enqueue_question  # noqa: E402
from worker.jobs.runtime import build_runtime  # noqa: E402
from worker.jobs.sink import read_console_events  # noqa: E402
from worker.ops.redis_connection import connect, stop_embedded_server  # noqa: E402
from worker.tools.search import ripgrep_binary  # noqa: E402

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


SEARCHES = [("def retry|class Retry", False), ("backoff", True)]


def worker_env(settings: Any, repos_file: Path, base_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "CODEBOT_DATA_DIR": str(settings.data_dir),
        "CODEBOT_REPOS_FILE": str(repos_file),
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "k",
        "CODEBOT_MODEL_MAX_RETRIES": "0",
    }


def raw_rg_seconds(snapshot_root: Path, repeats: int = 3) -> float:
    """The floor: the two searches as plain `rg` over the snapshot, best of `repeats`."""
    rg = ripgrep_binary()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for pattern, ignore_case in SEARCHES:
            command = [rg, "-e", pattern, *(["-i"] if ignore_case else [])]
            subprocess.run(command, cwd=snapshot_root, stdout=subprocess.DEVNULL, check=False)
        best = min(best, time.perf_counter() - started)
    return best


def cpu_seconds(pid: int) -> tuple[float, float]:
    """A process's own CPU seconds and its waited-for children's (ripgrep), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


@dataclass
class Overhead:
    samples: list[float]  # per question: enqueue to answer, less the model server's time
    floors: list[float]  # per question, right after it: the two searches as raw rg
    worker_cpu: float  # per question: the worker process's own CPU seconds
    children_cpu: float  # per question: its children's (ripgrep)


def overhead(tmp: Path, repos_file: Path, runs: int, pool: str) -> Overhead:
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
    current = runtime.mirrors.current("stdlib")
    assert current is not None
    redis = connect(settings)
    worker = subprocess.Popen(
        [sys.executable, "-m", "codebot.cli", "worker", "--pool", pool],
        env=worker_env(settings, repos_file, model.base_url),
        stderr=subprocess.DEVNULL,
    )
    samples, floors = [], []
    cpu_at_start = (0.0, 0.0)
    try:
        for run in range(runs + 1):
            if run == 1:  # the first run waits for the worker to start
                cpu_at_start = cpu_seconds(worker.pid)
            (first, second) = SEARCHES
            model.enqueue(
                tool_calls(("search", {"pattern": first[0], "repo": "stdlib"})),
                tool_calls(
                    (
                        "read_file",
                        {"repo": "stdlib", "path": "asyncio/tasks.py", "start_line": 1, "end_line": 200},
                    ),
                    ("search", {"pattern": second[0], "repo": "stdlib", "ignore_case": second[1]}),
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
            events = list(read_console_events(redis, question.id, 60, poll_ms=5))
            elapsed = time.perf_counter() - started
            assert events and events[-1][0] == "answer", events
            samples.append(elapsed - (model.busy_seconds - busy_before))
            floors.append(raw_rg_seconds(current.root, repeats=1))  # under this question's conditions
        cpu_at_end = cpu_seconds(worker.pid)
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        model.close()
        stop_embedded_server(settings)
    own, children = (end - start for end, start in zip(cpu_at_end, cpu_at_start, strict=True))
    return Overhead(samples[1:], floors[1:], own / runs, children / runs)


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


def throughput(
    tmp: Path, repos_file: Path, questions: int, concurrency: int, pool: str, processes: int
) -> dict[str, Any]:
    def answer(body: dict[str, Any]) -> Any:
        rounds = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if rounds < TURNS_PER_QUESTION - 1:
            return slow(
                1.0, tool_calls(("search", {"pattern": "def main", "repo": "stdlib", "glob": "asyncio/*.py"}))
            )
        return slow(1.0, text("done [stdlib:asyncio/__main__.py#L1]"))

    model = ScriptedModel(answer)
    data_dir = tmp / "data-throughput"  # synced once, then reused by every run
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
            id=event_identity("console", f"tp-{pool}-{concurrency}-{i}"),
            asker="bench",
            target=ReplyTarget(platform="console", channel="bench"),
            text=f"q{i}",
            repos=["stdlib"],
        )
        enqueue_question(redis, question, settings)
        ids.append(question.id)
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "codebot.cli",
            "worker",
            "--burst",
            "--concurrency",
            str(concurrency),
            "--pool",
            pool,
        ],
        env=worker_env(settings, repos_file, model.base_url),
        stderr=subprocess.DEVNULL,
    )
    peak = [0]
    first_request = [0.0]

    def sample() -> None:
        while worker.poll() is None:
            if not first_request[0] and model.requests:
                first_request[0] = time.perf_counter()
            peak[0] = max(peak[0], pss_kib(worker.pid))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    worker.wait()
    ended = time.perf_counter()
    sampler.join()
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    answered = sum(
        1 for qid in ids if any(k == "answer" for k, _ in read_console_events(redis, qid, 1, poll_ms=10))
    )
    model.close()
    stop_embedded_server(settings)
    elapsed = ended - first_request[0]
    ideal = concurrency * 60 / TURNS_PER_QUESTION
    per_minute = answered / elapsed * 60
    return {
        "answered": answered,
        "seconds": elapsed,
        "per_minute": per_minute,
        "ideal": ideal,
        "ratio": per_minute / ideal,
        "peak_pss_mib": peak[0] / 1024,
        "pss_per_question_mib": peak[0] / 1024 / concurrency,
        "cpu_per_question": cpu / max(1, answered),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument(
        "--concurrency", type=int, nargs="*", default=[8, 32, 64], help="none: skip the throughput runs"
    )
    parser.add_argument("--overhead-runs", type=int, default=10)
    parser.add_argument("--pool", choices=["threads", "fork"], default="threads")
    parser.add_argument("--processes", type=int, default=1, help="with --pool threads")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as raw:
        tmp = Path(raw)
        source = build_corpus(tmp)
        repos_file = write_whitelist(tmp, source)
        print(
            f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; corpus: Python stdlib; pool {args.pool}"
        )
        if args.overhead_runs:
            measured = overhead(tmp, repos_file, args.overhead_runs, args.pool)
            samples, floors = measured.samples, measured.floors
            median, floor = statistics.median(samples), statistics.median(floors)
            pairs = statistics.median(o / f for o, f in zip(samples, floors, strict=True))
            print(f"\n### Overhead per question (4 tool calls, zero-latency model, {len(samples)} runs)\n")
            print(
                "| median overhead | p90 | floor: 2 raw rg scans (median, best) | ratio | median of pairs "
                "| ratio to the best floor | worker CPU / rg CPU per question | goal |"
            )
            print("|---|---|---|---|---|---|---|---|")
            p90 = sorted(samples)[max(0, int(len(samples) * 0.9) - 1)]
            print(
                f"| {median:.4f} s | {p90:.4f} s | {floor:.4f} s, {min(floors):.4f} s | {median / floor:.2f} "
                f"| {pairs:.2f} | {median / min(floors):.2f} "
                f"| {measured.worker_cpu * 1000:.1f} ms / {measured.children_cpu * 1000:.1f} ms "
                "| ≤ 1.5 |",
                flush=True,
            )
        if not args.concurrency:
            return
        print("\n### Throughput (1 s per model turn, 3 turns per question)\n")
        print(
            "| concurrency | answered | seconds | per minute | ideal | ratio | CPU s per question "
            "| peak worker PSS | PSS per in-flight question |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for n in args.concurrency:
            # at least 6 rounds of N questions, so the last partial round does not dominate
            r = throughput(tmp, repos_file, max(args.questions, 6 * n), n, args.pool, args.processes)
            print(
                f"| {n} | {r['answered']} | {r['seconds']:.1f} | {r['per_minute']:.1f} | "
                f"{r['ideal']:.0f} | {r['ratio']:.2f} | {r['cpu_per_question']:.3f} | "
                f"{r['peak_pss_mib']:.0f} MiB | {r['pss_per_question_mib']:.1f} MiB |",
                flush=True,
            )


if __name__ == "__main__":
    main()
