"""One embedded Redis per data dir, shared by processes; a clear error when Redis is unreachable."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from config.settings import load_settings
from tests.support.redis_outage import kill_embedded_server
from tests.support.redis_servers import persist_now, redis_server, wait_until
from tests.support.worker_procs import wait_dead
from worker.ops.redis_connection import (
    RedisUnavailable,
    connect,
    redis_server_binary,
    server_pid,
    stop_embedded_server,
)


def test_processes_with_the_same_data_dir_share_one_embedded_server(tmp_path: Path) -> None:
    settings = load_settings(env_file=None, data_dir=tmp_path / "data")
    try:
        connect(settings).set("shared", "yes")
        code = (
            "from config.settings import load_settings; from worker.ops.redis_connection import connect;"
            f"print(connect(load_settings(env_file=None, data_dir={str(tmp_path / 'data')!r})).get('shared').decode())"
        )
        other = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=30,
            cwd=Path(__file__).parents[1],
        )
        assert other.stdout.strip() == "yes", other.stderr
    finally:
        stop_embedded_server(settings)


def test_the_embedded_server_keeps_queued_data_across_a_crash(tmp_path: Path) -> None:
    settings = load_settings(env_file=None, data_dir=tmp_path / "data")
    try:
        client = connect(settings)
        client.rpush("queue", "question-1")
        persist_now(client)  # in the append-only file: not a second of fsync a busy machine may stretch
        crashed = server_pid(settings)
        assert crashed
        kill_embedded_server(settings)
        wait_dead(crashed)  # gone, so connect() starts it again from its files
        assert connect(settings).lrange("queue", 0, -1) == [b"question-1"]
    finally:
        stop_embedded_server(settings)


def test_an_unreachable_redis_url_names_the_server_and_the_fix() -> None:
    settings = load_settings(env_file=None, redis_url="redis://127.0.0.1:1/0")
    with pytest.raises(RedisUnavailable) as caught:
        connect(settings)
    assert "127.0.0.1:1 is unreachable" in str(caught.value)
    assert "unset REDIS_URL" in str(caught.value)


def test_the_cli_reports_unreachable_redis_in_one_line(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "REDIS_URL": "redis://127.0.0.1:1/0"}
    result = subprocess.run(
        [sys.executable, "-m", "codebot.cli", "worker", "--burst"],
        capture_output=True,
        text=True,
        env=env,
        timeout=110,  # a hang guard: its imports alone took 40-60 s at load 20 on 2 cores
    )
    assert result.returncode == 2
    assert result.stderr.strip().startswith("codebot: Redis at 127.0.0.1:1 is unreachable")
    assert "Traceback" not in result.stderr


def test_a_redis_that_wants_another_password_is_named_as_such_not_as_unreachable(tmp_path: Path) -> None:
    sock = tmp_path / "r.sock"
    server = subprocess.Popen(
        [redis_server_binary(), "--port", "0", "--unixsocket", str(sock), "--requirepass", "s3cret",
         "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        # up when it answers, however long a busy machine takes to start it (the bound: a hang guard)
        ready = redis.Redis(unix_socket_path=str(sock), password="s3cret", socket_connect_timeout=5)
        wait_until(ready.ping, 60, "redis-server on its unix socket")
        for url in (f"unix://{sock}", f"unix://{sock}?password=wrong"):
            with pytest.raises(RedisUnavailable, match="refused the password in REDIS_URL"):
                connect(load_settings(env_file=None, redis_url=url))
        assert connect(load_settings(env_file=None, redis_url=f"unix://{sock}?password=s3cret")).ping()
    finally:
        server.kill()
        server.wait()


def test_a_redis_url_server_that_can_lose_questions_is_named_in_one_warning_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    volatile = ("--appendonly", "no", "--save", "", "--maxmemory-policy", "allkeys-lru")
    with redis_server(tmp_path, *volatile) as server, caplog.at_level(logging.WARNING, "codebot.redis"):
        connect(load_settings(env_file=None, redis_url=server.url))
        connect(load_settings(env_file=None, redis_url=server.url))  # once per process, not per call
    [warning] = [r.getMessage() for r in caplog.records]
    assert warning.startswith(f"Redis at 127.0.0.1:{server.port} can lose questions: it has no persistence")
    assert "set appendonly yes" in warning
    assert "its maxmemory-policy is allkeys-lru" in warning and "set maxmemory-policy noeviction" in warning


@pytest.mark.parametrize("persistence", [("--appendonly", "yes"), ("--save", "60", "1")])
def test_a_redis_url_server_that_persists_and_never_evicts_gets_no_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, persistence: tuple[str, ...]
) -> None:
    with redis_server(tmp_path, *persistence) as server, caplog.at_level(logging.WARNING, "codebot.redis"):
        connect(load_settings(env_file=None, redis_url=server.url))
    assert caplog.records == []


def test_a_read_only_replica_in_redis_url_is_refused_at_start_in_one_line(tmp_path: Path) -> None:
    with (
        redis_server(tmp_path) as primary,
        redis_server(tmp_path, "--replicaof", "127.0.0.1", str(primary.port)) as replica,
        pytest.raises(RedisUnavailable) as caught,
    ):
        connect(load_settings(env_file=None, redis_url=replica.url))
    assert str(caught.value).startswith(f"Redis at 127.0.0.1:{replica.port} refuses writes (READONLY")
    assert "point REDIS_URL at the primary" in str(caught.value)
