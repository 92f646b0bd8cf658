"""Prometheus metrics kept in Redis, so every process on every machine adds to the same numbers.

Work horses are forked and short-lived, and questions run on many machines: counters in
process memory would be lost or split. Each event increments a Redis hash; any adapter or
worker serves `/metrics` by reading it (plus live gauges: queue depth, workers alive).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from redis import Redis
from redis.exceptions import RedisError

from config.errors import ConfigError

log = logging.getLogger("codebot.metrics")

METRICS_KEY = "codebot:metrics"
QUESTION_SECONDS_BUCKETS = (1, 2, 5, 10, 20, 30, 60, 120, 300)
HELP = {
    "codebot_questions_total": ("counter", "Questions finished, by platform and outcome."),
    "codebot_question_seconds": ("histogram", "Seconds from a worker taking a question to its answer."),
    "codebot_tool_calls_total": ("counter", "Tool calls made by the agent, by tool."),
    "codebot_tokens_total": ("counter", "Model tokens used, by kind (prompt, completion)."),
    "codebot_failures_total": ("counter", "Questions that ended in an apology, by reason."),
    "codebot_queue_depth": ("gauge", "Questions waiting in the queue."),
    "codebot_workers": ("gauge", "RQ workers alive."),
}


def _field(name: str, labels: dict[str, str]) -> str:
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{body}}}" if body else name


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")[:100]


def count(redis: Redis, name: str, amount: float = 1, **labels: str) -> None:
    try:
        redis.hincrbyfloat(METRICS_KEY, _field(name, labels), amount)
    except RedisError:
        log.warning("metrics: could not record %s", name)


def observe_question(
    redis: Redis,
    platform: str,
    status: str,
    seconds: float,
    tool_calls: dict[str, int],
    tokens: tuple[int, int],
) -> None:
    """Everything one finished question adds, in one round trip."""
    fields: dict[str, float] = {
        _field("codebot_questions_total", {"platform": platform, "status": status}): 1
    }
    for bound in QUESTION_SECONDS_BUCKETS:
        if seconds <= bound:
            fields[_field("codebot_question_seconds_bucket", {"le": str(bound)})] = 1
    fields[_field("codebot_question_seconds_bucket", {"le": "+Inf"})] = 1
    fields["codebot_question_seconds_count"] = 1
    fields["codebot_question_seconds_sum"] = seconds
    for tool, calls in tool_calls.items():
        fields[_field("codebot_tool_calls_total", {"tool": tool})] = calls
    fields[_field("codebot_tokens_total", {"kind": "prompt"})] = tokens[0]
    fields[_field("codebot_tokens_total", {"kind": "completion"})] = tokens[1]
    try:
        pipe = redis.pipeline()
        for key, amount in fields.items():
            pipe.hincrbyfloat(METRICS_KEY, key, amount)
        pipe.execute()
    except RedisError:
        log.warning("metrics: could not record a question")


def _base_name(field: str) -> str:
    name = field.split("{", 1)[0]
    for suffix in ("_bucket", "_count", "_sum"):
        if name.endswith(suffix) and name.removesuffix(suffix) in HELP:
            return name.removesuffix(suffix)
    return name


def render(redis: Redis) -> str:
    """The Prometheus text exposition of everything recorded, plus live gauges."""
    from rq import Worker

    from worker.jobs.queue import queue_depth

    raw: dict[Any, Any] = redis.hgetall(METRICS_KEY)
    samples = {(k.decode() if isinstance(k, bytes) else k): float(v) for k, v in raw.items()}
    samples["codebot_queue_depth"] = float(queue_depth(redis))
    samples["codebot_workers"] = float(Worker.count(connection=redis))
    lines: list[str] = []
    for name, (kind, text) in HELP.items():
        mine = sorted(f for f in samples if _base_name(f) == name)
        lines.append(f"# HELP {name} {text}")
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(f"{f} {_number(samples[f])}" for f in mine)
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def parse(text: str) -> Iterator[tuple[str, float]]:
    """Samples of a rendered exposition (used by tests and `codebot status`)."""
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            yield name, float(value)


class _Handler(BaseHTTPRequestHandler):
    # Headers and body go out in separate writes; with Nagle on, each answer waits ~40 ms
    # for a delayed ACK.
    disable_nagle_algorithm = True
    redis: Redis

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self.send_error(404)
            return
        try:
            body = render(self.redis).encode()
            status = 200
        except RedisError as exc:
            body = f"# redis unreachable: {type(exc).__name__}\n".encode()
            status = 503
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # scrapes every few seconds would drown the log


def serve_metrics(redis: Redis, port: int, host: str = "0.0.0.0") -> ThreadingHTTPServer:
    """Serve /metrics in a background thread; returns the server (port 0 picks a free port)."""
    handler = type("MetricsHandler", (_Handler,), {"redis": redis})
    try:
        server = ThreadingHTTPServer((host, port), handler)
    except OSError as exc:  # the port is taken, or not ours to bind: bad configuration, said in one line
        raise ConfigError(
            f"CODEBOT_METRICS_PORT: cannot serve /metrics on {host}:{port} ({exc.strerror})"
        ) from None
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    log.info("metrics on http://%s:%s/metrics", host, server.server_address[1])
    return server


def metric_value(samples: Iterable[tuple[str, float]], name: str) -> float:
    return sum(value for field, value in samples if field == name or field.startswith(name + "{"))
