"""The embedded Redis heals under running processes, never doubles, and says what is wrong.

A long-running process's client starts a dead embedded server again (with its data) once no
server process is left on the data dir; an operator's `codebot redis stop` is respected; a
server that refuses writes (MISCONF, OOM) is told apart from one that is unreachable.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from bot import texts
from config.settings import Settings, load_settings
from tests.support.cli import run_codebot
from tests.support.redis_outage import kill_embedded_server
from tests.support.redis_servers import persist_now
from tests.support.worker_procs import PROJECT_ROOT, alive, settings_env, wait_dead
from worker.ops.embedded_redis import HEAL_RETRY_SECONDS
from worker.ops.redis_connection import (
    RedisFailure,
    connect,
    embedded,
    redis_failure,
    server_pid,
    stop_embedded_server,
)


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    settings = load_settings(env_file=None, data_dir=tmp_path / "data")
    yield settings
    pid = server_pid(settings)
    if not stop_embedded_server(settings) and pid and alive(pid):
        os.kill(pid, signal.SIGKILL)


def refuse_writes_misconf(client: redis.Redis, tmp_path: Path) -> None:
    """A snapshot that cannot be written (its directory is gone, as on a broken disk): MISCONF."""
    doomed = tmp_path / "doomed"
    doomed.mkdir()
    client.config_set("dir", str(doomed))
    doomed.rmdir()
    client.bgsave()
    deadline = time.monotonic() + 30
    while client.info("persistence")["rdb_last_bgsave_status"] != "err":
        assert time.monotonic() < deadline, "the snapshot never failed"
        time.sleep(0.05)


def codebot(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return run_codebot(*args, env=settings_env(settings), cwd=PROJECT_ROOT, inherit_environment=False)


def test_a_killed_embedded_redis_is_started_again_by_the_next_call_with_its_data(settings: Settings) -> None:
    client = connect(settings)
    client.rpush("queue", "question-1")
    persist_now(client)  # what was queued is in the append-only file
    first = server_pid(settings)
    assert first
    kill_embedded_server(settings)
    wait_dead(first)
    assert client.lrange("queue", 0, -1) == [b"question-1"]  # the same client, a new server
    assert server_pid(settings) not in (None, first)


def test_a_redis_stopped_by_an_operator_stays_stopped_until_a_codebot_command_starts_it(
    settings: Settings,
) -> None:
    client = connect(settings)
    assert stop_embedded_server(settings)
    with pytest.raises(redis.ConnectionError, match="stopped with `codebot redis stop`"):
        client.ping()
    assert redis_failure(redis.ConnectionError("x")) is RedisFailure.UNREACHABLE
    connect(settings)  # any codebot command starts it again
    assert client.ping()


def test_no_second_server_is_started_on_the_data_of_a_server_still_running(settings: Settings) -> None:
    connect(settings)
    server = embedded(settings)
    pid = server.pid()
    assert pid
    server.socket.unlink()  # the server lives on, but nobody can reach it any more
    with pytest.raises(redis.ConnectionError, match=f"pid {pid}.* running but not answering"):
        server.client().ping()
    assert server.pid() == pid and alive(pid)  # no new server took over its append-only file
    os.kill(pid, signal.SIGKILL)
    wait_dead(pid)
    time.sleep(HEAL_RETRY_SECONDS)  # a failed heal is not tried again sooner
    assert server.client().ping()  # once it is really gone, the data dir is safe to reuse


def test_the_embedded_server_takes_rdb_snapshots_as_well_as_its_append_only_file(settings: Settings) -> None:
    config = connect(settings).config_get("*")
    assert config["save"] == "60 1 300 100"
    assert config["appendonly"] == "yes"


def test_a_redis_refusing_writes_is_told_apart_from_an_unreachable_one(
    settings: Settings, tmp_path: Path
) -> None:
    client = connect(settings)
    client.config_set("maxmemory", "1")
    with pytest.raises(redis.RedisError) as out_of_memory:
        client.set("key", "value")
    client.config_set("maxmemory", "0")
    refuse_writes_misconf(client, tmp_path)
    with pytest.raises(redis.RedisError) as misconf:
        client.set("key", "value")
    client.config_set("dir", str(embedded(settings).home))
    for refused in (out_of_memory.value, misconf.value):
        assert redis_failure(refused) is RedisFailure.REFUSES_WRITES
        assert texts.queue_trouble(refused) == texts.QUEUE_REFUSES_WRITES
    assert texts.queue_trouble(redis.ConnectionError("Connection refused")) == texts.QUEUE_UNAVAILABLE


def test_a_command_meeting_a_redis_that_refuses_writes_says_so_in_one_line(
    settings: Settings, tmp_path: Path
) -> None:
    client = connect(settings)
    refuse_writes_misconf(client, tmp_path)
    try:
        worker = codebot(settings, "worker", "--burst")
        status = codebot(settings, "status")
    finally:
        client.config_set("dir", str(embedded(settings).home))
    assert worker.returncode == 2 and "Traceback" not in worker.stderr
    [line] = worker.stderr.strip().splitlines()
    assert line.startswith(f"codebot: embedded Redis under {embedded(settings).home} refuses writes (MISCONF")
    assert "free space" in line
    assert status.returncode == 1 and not status.stderr  # status names the trouble in its one line
    [line] = status.stdout.strip().splitlines()
    assert line.startswith(f"queue: embedded Redis under {embedded(settings).home} refuses writes (MISCONF")


def test_redis_stop_on_a_server_that_cannot_save_says_so_in_one_line_and_nosave_stops_it(
    settings: Settings, tmp_path: Path
) -> None:
    client = connect(settings)
    refuse_writes_misconf(client, tmp_path)  # its final snapshot cannot be written either
    refused = codebot(settings, "redis", "stop")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    [line] = refused.stderr.strip().splitlines()
    assert "could not write its final snapshot and is still running" in line
    assert "`codebot redis stop --nosave`" in line
    assert embedded(settings).answers()  # still up: nothing was lost by trying
    stopped = codebot(settings, "redis", "stop", "--nosave")
    assert (stopped.returncode, stopped.stdout.strip()) == (
        0,
        f"stopped embedded Redis under {embedded(settings).home}",
    )
    assert not embedded(settings).answers()


def test_redis_stop_on_a_hung_server_says_so_in_one_line_and_leaves_it_alone(settings: Settings) -> None:
    connect(settings)
    pid = server_pid(settings)
    assert pid
    os.kill(pid, signal.SIGSTOP)
    try:
        result = codebot(settings, "redis", "stop")
    finally:
        os.kill(pid, signal.SIGCONT)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert f"(pid {pid}) is running but not answering, so it was not stopped" in line
    assert alive(pid)
