"""Prometheus metrics kept in Redis, so every process on every machine adds to the same numbers.

Work horses are forked and short-lived, and questions run on many machines: counters in
process memory would be lost or split. Each event increments a Redis hash (one field per
series, `name{label="value"}`); any adapter or worker serves `/metrics` through
prometheus_client with a custom collector that reads the hash on each scrape (plus live
gauges: queue depth, workers alive). docs/operations.md lists the names.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector
from redis import Redis
from redis.client import Pipeline
from redis.exceptions import RedisError
from rq import Worker

from config.errors import ConfigError

if TYPE_CHECKING:
    from wsgiref.types import StartResponse
    from wsgiref.types import WSGIApplication as WSGIApp

log = logging.getLogger("codebot.metrics")

METRICS_KEY = "codebot:metrics"
QUESTION_SECONDS_BUCKETS = (1, 2, 5, 10, 20, 30, 60, 120, 300)
HELP = {
    "codebot_questions_total": "Questions finished, by platform and outcome (status: answered, "
    "not_an_answer, cut_off, failed, budget_spent, no_snapshot, already_answered).",
    "codebot_question_seconds": "Time to answer: seconds from a worker taking a question to its final "
    "reply posted (or stored for the outbox), whatever its outcome; the queue's wait is not in it.",
    "codebot_tool_calls_total": "Tool calls made by the agent, by tool.",
    "codebot_tokens_total": "Model tokens used, by kind (prompt, completion).",
    "codebot_failures_total": "Questions that ended in an apology, by reason.",
    "codebot_deliveries_total": "Attempts to deliver a stored final message, by platform and result "
    "(delivered, retry: refused and due again, undeliverable: given up).",
    "codebot_feedback_total": "Votes on answers (a changed vote counts again), by platform and vote (up, down).",
    "codebot_polls_total": "Scheduled polls of a repo, by result (unchanged: git ls-remote found the "
    "commit served, nothing fetched; moved: fetched; first_sync: no mirror yet, fetched; "
    "ls_remote_failed: fetched instead).",
    "codebot_queue_depth": "Questions waiting in the queue.",
    "codebot_workers": "RQ workers alive.",
    "codebot_tool_threads_stuck": "Tool calls given up at their deadline whose thread has not returned "
    "(a read stuck in the kernel), over all workers.",
}
COUNTER_LABELS = {
    "codebot_questions_total": ["platform", "status"],
    "codebot_tool_calls_total": ["tool"],
    "codebot_tokens_total": ["kind"],
    "codebot_failures_total": ["reason"],
    "codebot_deliveries_total": ["platform", "result"],
    "codebot_feedback_total": ["platform", "vote"],
    "codebot_polls_total": ["result"],
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
    into: Pipeline | None = None,
) -> None:
    """Everything one finished question adds, in one round trip (or queued `into` a caller's
    pipeline, whose caller then sends it and meets any failure)."""
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
        pipe = into if into is not None else redis.pipeline()
        for key, amount in fields.items():
            pipe.hincrbyfloat(METRICS_KEY, key, amount)
        if into is None:
            pipe.execute()
    except RedisError:
        log.warning("metrics: could not record a question")


def totals_by(redis: Redis, name: str, label: str) -> dict[str, float]:
    """A counter's totals by one label, summed over the others (e.g. questions by status)."""
    raw: dict[Any, Any] = redis.hgetall(METRICS_KEY)
    totals: dict[str, float] = {}
    for key, value in raw.items():
        field, labels = _parse_field(key.decode() if isinstance(key, bytes) else key)
        if field == name and label in labels:
            totals[labels[label]] = totals.get(labels[label], 0.0) + float(value)
    return totals


_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _parse_field(stored: str) -> tuple[str, dict[str, str]]:
    """`name{k="v",…}` as `count` stored it -> (name, labels)."""
    name, _, rest = stored.partition("{")
    labels = {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _LABEL.findall(rest)}
    return name, labels


class RedisMetrics(Collector):
    """A prometheus_client collector over the counters in Redis, plus two live gauges.

    Read on every scrape: nothing is kept in process memory, so any adapter or worker serves
    the same numbers. `queue_depth` is passed in (the queue lives in a layer above this one).
    """

    def __init__(
        self, redis: Redis, queue_depth: Callable[[Redis], int], stuck: Callable[[Redis], int] | None = None
    ) -> None:
        self.redis = redis
        self.queue_depth = queue_depth
        self.stuck = stuck  # the workers' stuck tool threads (a worker serves it; an adapter need not)

    def collect(self) -> Iterator[Metric]:
        raw: dict[Any, Any] = self.redis.hgetall(METRICS_KEY)
        stored = [
            (*_parse_field(k.decode() if isinstance(k, bytes) else k), float(v)) for k, v in raw.items()
        ]
        for name, labels in COUNTER_LABELS.items():
            family = CounterMetricFamily(name, HELP[name], labels=labels)
            for field, values, value in stored:
                if field == name:
                    family.add_metric([values.get(label, "") for label in labels], value)
            yield family
        yield self._histogram(stored)
        yield GaugeMetricFamily(
            "codebot_queue_depth", HELP["codebot_queue_depth"], self.queue_depth(self.redis)
        )
        workers = float(Worker.count(connection=self.redis))
        yield GaugeMetricFamily("codebot_workers", HELP["codebot_workers"], workers)
        if self.stuck is not None:
            name = "codebot_tool_threads_stuck"
            yield GaugeMetricFamily(name, HELP[name], float(self.stuck(self.redis)))

    @staticmethod
    def _histogram(stored: list[tuple[str, dict[str, str], float]]) -> HistogramMetricFamily:
        name = "codebot_question_seconds"
        buckets = {bound: 0.0 for bound in [*map(str, QUESTION_SECONDS_BUCKETS), "+Inf"]}
        total = 0.0
        for field, labels, value in stored:
            if field == f"{name}_bucket" and labels.get("le") in buckets:
                buckets[labels["le"]] = value
            elif field == f"{name}_sum":
                total = value
        family = HistogramMetricFamily(name, HELP[name])
        family.add_metric([], buckets=list(buckets.items()), sum_value=total)
        return family


def exposition(redis: Redis, queue_depth: Callable[[Redis], int]) -> bytes:
    """The Prometheus text exposition of everything recorded, plus the live gauges."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RedisMetrics(redis, queue_depth))
    return generate_latest(registry)


class _QuietHandler(WSGIRequestHandler):
    # Headers and body go out in separate writes; with Nagle on, each answer waits ~40 ms
    # for a delayed ACK.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass  # scrapes every few seconds would drown the log


Health = Callable[[Redis], "str | None"]  # why the process is unhealthy, or None
Stuck = Callable[[Redis], int]  # tool threads stuck, over all workers


def _health(redis: Redis, health: Health | None, start_response: StartResponse) -> list[bytes]:
    """`GET /health`: 200 "ok", or 503 and the reason (an exhausted tool pool, Redis unreachable)."""
    try:
        reason = health(redis) if health is not None else None
    except RedisError as exc:
        reason = f"unhealthy: redis unreachable ({type(exc).__name__})"
    status = "200 OK" if reason is None else "503 Service Unavailable"
    start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
    return [f"{reason or 'ok'}\n".encode()]


def metrics_app(
    redis: Redis,
    queue_depth: Callable[[Redis], int],
    health: Health | None = None,
    stuck: Stuck | None = None,
) -> WSGIApp:
    """prometheus_client's own WSGI app over the Redis collector (OpenMetrics when the scraper
    asks for it, gzip when it accepts it), answering /metrics and /health, HEAD as GET without
    the body, and 503 (not a traceback) when Redis is unreachable."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RedisMetrics(redis, queue_depth, stuck))
    exposition_app = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/health":
            body = _health(redis, health, start_response)
            return [] if environ["REQUEST_METHOD"] == "HEAD" else body
        if environ.get("PATH_INFO") != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"not found: the metrics are at /metrics\n"]
        head = environ["REQUEST_METHOD"] == "HEAD"
        try:
            body = exposition_app({**environ, "REQUEST_METHOD": "GET"} if head else environ, start_response)
        except RedisError as exc:
            start_response("503 Service Unavailable", [("Content-Type", CONTENT_TYPE_LATEST)])
            body = [f"# redis unreachable: {type(exc).__name__}\n".encode()]
        return [] if head else body

    return app


def serve_metrics(
    redis: Redis,
    port: int,
    queue_depth: Callable[[Redis], int],
    host: str = "127.0.0.1",
    health: Health | None = None,
    stuck: Stuck | None = None,
) -> WSGIServer:
    """Serve /metrics and /health in a background thread; returns the server (port 0 picks a free port)."""
    app = metrics_app(redis, queue_depth, health, stuck)
    try:
        server = make_server(host, port, app, ThreadingWSGIServer, handler_class=_QuietHandler)
    except OSError as exc:  # the port is taken, or not ours to bind: bad configuration, said in one line
        raise ConfigError(
            f"CODEBOT_METRICS_PORT: cannot serve /metrics on {host}:{port} ({exc.strerror})"
        ) from None
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    log.info("metrics on http://%s:%s/metrics", host, server.server_address[1])
    return server
