"""`/metrics` as a scraper expects it: prometheus_client's own exposition, HEAD, gzip and
OpenMetrics negotiation, 404 elsewhere, 503 (not a traceback) when Redis is gone."""

from __future__ import annotations

import gzip
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from redis import Redis

from tests.support.e2e import Rig
from worker.jobs.queue import queue_depth
from worker.ops.metrics import count, serve_metrics


@pytest.fixture
def metrics_url(rig: Rig) -> Iterator[str]:
    count(rig.redis, "codebot_failures_total", reason="model")
    server = serve_metrics(rig.redis, 0, queue_depth)  # no host: the default
    assert server.server_address[0] == "127.0.0.1"
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def fetch(url: str, method: str = "GET", **headers: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_metrics_listen_on_localhost_by_default_and_answer_a_plain_scrape(metrics_url: str) -> None:
    status, headers, body = fetch(metrics_url)
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert b'codebot_failures_total{reason="model"} 1.0' in body


def test_head_answers_like_get_without_a_body(metrics_url: str) -> None:
    status, headers, body = fetch(metrics_url, method="HEAD")
    assert (status, body) == (200, b"")
    assert headers["Content-Type"].startswith("text/plain")


def test_a_scraper_that_accepts_gzip_gets_it_compressed(metrics_url: str) -> None:
    status, headers, body = fetch(metrics_url, **{"Accept-Encoding": "gzip"})
    assert status == 200 and headers["Content-Encoding"] == "gzip"
    assert b"codebot_questions_total" in gzip.decompress(body)


def test_a_scraper_that_asks_for_openmetrics_gets_openmetrics(metrics_url: str) -> None:
    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
    status, headers, body = fetch(metrics_url, Accept=accept)
    assert status == 200 and headers["Content-Type"].startswith("application/openmetrics-text")
    assert body.rstrip().endswith(b"# EOF")
    assert b'codebot_failures_total{reason="model"} 1.0' in body


def test_other_paths_are_not_found_and_a_lost_redis_is_a_503(rig: Rig, metrics_url: str) -> None:
    assert fetch(metrics_url.replace("/metrics", "/"))[0] == 404
    gone = Redis(port=1, socket_connect_timeout=1)  # nothing listens on port 1
    server = serve_metrics(gone, 0, queue_depth)
    try:
        status, _, body = fetch(f"http://127.0.0.1:{server.server_address[1]}/metrics")
    finally:
        server.shutdown()
        server.server_close()
    assert status == 503 and body.startswith(b"# redis unreachable: ConnectionError")
