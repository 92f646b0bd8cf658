"""Every sync in the history: `codebot repos sync` (a real subprocess) records each sync as a
catch-up or a refresh does (which repo, which machine, the commit, how long, the kind of a
failure), into a real Redis stream that a real recorder moves into a real SQLite database."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis
from sqlalchemy import Engine

from config.settings import load_settings
from tests.support.cli import run_codebot
from tests.support.git_remote import GitRemote, write_whitelist
from tests.support.redis_servers import free_port, redis_server
from worker.history import schema
from worker.history.export import rows_since
from worker.history.recorder import Recorder
from worker.history.store import open_engine, upgrade
from worker.ops.redis_connection import connect, ensure_embedded_server, server_pid, stop_embedded_server
from worker.repos.mirrors import Mirrors
from worker.repos.refresh import catch_up


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with redis_server(tmp_path) as server:
        yield server.url


def history(tmp_path: Path, redis: Redis) -> Engine:
    """The stream drained by a recorder into a fresh SQLite history."""
    engine = open_engine(f"sqlite:///{tmp_path / 'history.sqlite3'}")
    upgrade(engine)
    Recorder(redis, engine, "test").run(threading.Event(), drain=True)
    return engine


def project(tmp_path: Path, remote: GitRemote, redis_url: str) -> dict[str, str]:
    """`app` from a real remote and `gone`, whose remote does not exist."""
    write_whitelist(tmp_path / "conf", [{"name": "app", "url": str(remote.bare)}, {"name": "gone", "url": str(tmp_path / "nowhere.git")}])  # fmt: skip
    return {
        "CODEBOT_DATA_DIR": str(tmp_path / "data"),
        "CODEBOT_REPOS_FILE": str(tmp_path / "conf" / "repos.toml"),
        "REDIS_URL": redis_url,
    }


def test_codebot_repos_sync_records_each_success_and_failure_with_machine_commit_time_and_kind(
    tmp_path: Path, redis_url: str
) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    synced = run_codebot("repos", "sync", env=project(tmp_path, remote, redis_url))
    assert synced.returncode == 1, synced.stderr  # `gone` failed
    rows = list(rows_since(history(tmp_path, Redis.from_url(redis_url)), schema.syncs, 0))
    found = {r["repo"]: (r["origin"], r["ok"], r["host"], r["sha"], r["error_kind"]) for r in rows}
    host = socket.gethostname()
    assert found == {
        "app": ("cli", True, host, remote.sha(), ""),
        "gone": ("cli", False, host, "", "git"),
    }
    assert all(r["seconds"] > 0 for r in rows)
    assert "nowhere.git" in next(r["error"] for r in rows if r["repo"] == "gone")


def test_a_cli_sync_is_recorded_with_the_same_facts_as_a_catch_up(tmp_path: Path, redis_url: str) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    env = project(tmp_path, remote, redis_url)
    assert run_codebot("repos", "sync", "app", env=env).returncode == 0
    redis = Redis.from_url(redis_url)
    other = tmp_path / "other-machine"
    settings = load_settings(env_file=None, data_dir=other / "data")
    mirrors = Mirrors(settings, write_whitelist(other, [{"name": "app", "url": str(remote.bare)}]))
    catch_up(mirrors, redis, ["app"])  # the other machine follows the commit the CLI recorded
    rows = list(rows_since(history(tmp_path, redis), schema.syncs, 0))
    assert [r["origin"] for r in rows] == ["cli", "catch-up"]
    cli, caught = (
        {k: v for k, v in r.items() if k not in ("event_id", "at", "origin", "seconds")} for r in rows
    )
    assert cli == caught and cli["sha"] == remote.sha() and cli["ok"] is True


def test_without_redis_the_sync_still_runs_and_says_it_was_not_recorded(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    env = project(tmp_path, remote, f"redis://127.0.0.1:{free_port()}/0")
    synced = run_codebot("repos", "sync", "app", env=env)
    assert synced.returncode == 0, synced.stderr
    assert f"app  ✓ {remote.sha()[:7]} (new)" in synced.stdout
    assert "not recorded in the history" in synced.stdout and "unreachable" in synced.stdout


def test_with_the_embedded_redis_running_a_sync_is_recorded_there(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    env = project(tmp_path, remote, "")
    del env["REDIS_URL"]
    settings = load_settings(env_file=None, data_dir=tmp_path / "data")
    ensure_embedded_server(settings)  # as a worker on this machine runs it
    try:
        assert run_codebot("repos", "sync", "app", env=env).returncode == 0
        rows = list(rows_since(history(tmp_path, connect(settings)), schema.syncs, 0))
    finally:
        stop_embedded_server(settings)
    assert [(r["repo"], r["origin"], r["ok"]) for r in rows] == [("app", "cli", True)]


def test_with_the_embedded_redis_not_running_a_sync_starts_none_and_says_it_was_not_recorded(
    tmp_path: Path,
) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    env = project(tmp_path, remote, "")
    del env["REDIS_URL"]
    synced = run_codebot("repos", "sync", "app", env=env)
    assert synced.returncode == 0, synced.stderr
    assert "not recorded in the history" in synced.stdout and "embedded Redis is not running" in synced.stdout
    settings = load_settings(env_file=None, data_dir=tmp_path / "data")
    assert server_pid(settings) is None
