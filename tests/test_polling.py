"""Polling as the fallback to webhooks: a scheduled poll asks `git ls-remote` first and fetches
only when the branch moved; with webhooks set up a repo is polled at the slow interval.

A real bare repo pushed to with real git, embedded Redis, and what git was asked read from
GIT_TRACE (every git command a poll starts, with its arguments, in order).
"""

from __future__ import annotations

import logging
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis import Redis

from config.settings import load_settings
from tests.support.git_remote import GitRemote, write_whitelist
from worker.ops.metrics import totals_by
from worker.ops.redis_connection import connect, stop_embedded_server
from worker.repos.mirrors import Mirrors
from worker.repos.refresh import claim_due_refreshes, period_offset_seconds, run_due_refreshes

_BUILT_IN = re.compile(r"trace: built-in: git (\S+)")


def setup(tmp_path: Path, entry: dict[str, Any], **settings: Any) -> tuple[GitRemote, Mirrors, Redis]:
    remote = GitRemote.create(tmp_path / "forge")
    whitelist = write_whitelist(
        tmp_path, [{"name": "app", "url": str(remote.bare), "branch": "main", **entry}]
    )
    options = {"data_dir": tmp_path / "data", "repos_file": whitelist.path, **settings}
    mirrors = Mirrors(load_settings(env_file=None, **options), whitelist)
    return remote, mirrors, connect(mirrors.settings)


@pytest.fixture
def polled(tmp_path: Path) -> Iterator[tuple[GitRemote, Mirrors, Redis]]:
    """A repo polled every 5 minutes, cloned once already."""
    remote, mirrors, redis = setup(tmp_path, {"refresh_minutes": 5})
    assert mirrors.sync("app").ok
    yield remote, mirrors, redis
    stop_embedded_server(mirrors.settings)


def git_commands(trace: Path) -> list[str]:
    """The git commands started, in order (ls-remote, fetch, upload-pack ...)."""
    if not trace.exists():
        return []
    return _BUILT_IN.findall(trace.read_text(encoding="utf-8", errors="replace"))


def start_of_period(name: str, minutes: int) -> float:
    period = minutes * 60
    offset = period_offset_seconds(name, period)
    return (time.time() + offset) // period * period - offset + 1


def test_a_poll_with_no_new_commit_asks_ls_remote_and_fetches_nothing(
    polled: tuple[GitRemote, Mirrors, Redis], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, mirrors, redis = polled
    served = mirrors.current("app")
    monkeypatch.setenv("GIT_TRACE", str(tmp_path / "trace"))
    assert run_due_refreshes(redis, mirrors) == []
    commands = git_commands(tmp_path / "trace")
    assert "ls-remote" in commands
    assert "fetch" not in commands
    assert mirrors.current("app") == served
    assert totals_by(redis, "codebot_polls_total", "result") == {"unchanged": 1.0}


def test_a_poll_after_a_push_fetches_it_and_serves_the_new_commit(
    polled: tuple[GitRemote, Mirrors, Redis], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote, mirrors, redis = polled
    pushed = remote.commit({"src/app.py": "print('v2')\n"})
    monkeypatch.setenv("GIT_TRACE", str(tmp_path / "trace"))
    (result,) = run_due_refreshes(redis, mirrors)
    assert result.ok and result.changed and result.sha == pushed
    assert (mirrors.current("app") or pytest.fail("no snapshot")).sha == pushed
    commands = git_commands(tmp_path / "trace")
    assert commands.index("ls-remote") < commands.index("fetch")  # asked first, then fetched
    assert totals_by(redis, "codebot_polls_total", "result") == {"moved": 1.0}


def test_a_poll_whose_ls_remote_fails_still_tries_the_fetch_and_counts_it(
    polled: tuple[GitRemote, Mirrors, Redis], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote, mirrors, redis = polled
    served = mirrors.current("app")
    remote.bare.rename(tmp_path / "gone.git")  # the remote is unreachable: both git steps fail
    monkeypatch.setenv("GIT_TRACE", str(tmp_path / "trace"))
    (result,) = run_due_refreshes(redis, mirrors)
    assert not result.ok and result.error
    commands = git_commands(tmp_path / "trace")
    assert commands.index("ls-remote") < commands.index("fetch")  # no verdict from ls-remote: fetched
    assert mirrors.current("app") == served  # still answering from the last good snapshot
    assert totals_by(redis, "codebot_polls_total", "result") == {"ls_remote_failed": 1.0}


def test_a_repo_with_its_own_webhook_secret_is_polled_hourly_not_every_refresh_minutes(
    tmp_path: Path,
) -> None:
    _, mirrors, redis = setup(tmp_path, {"refresh_minutes": 5, "webhook_secret": "${APP_HOOK_SECRET}"})
    try:
        now = start_of_period("app", 60)  # webhooks_poll_minutes' default
        assert claim_due_refreshes(redis, mirrors, now) == ["app"]
        assert claim_due_refreshes(redis, mirrors, now + 6 * 60) == []  # 5 minutes: not yet
        assert claim_due_refreshes(redis, mirrors, now + 59 * 60) == []
        assert claim_due_refreshes(redis, mirrors, now + 60 * 60) == ["app"]
    finally:
        stop_embedded_server(mirrors.settings)


def test_with_a_forge_secret_set_a_repo_without_refresh_minutes_is_still_polled_as_a_fallback(
    tmp_path: Path,
) -> None:
    _, mirrors, redis = setup(tmp_path, {}, webhooks_github_secret="github-hook-secret-5b8f0a")
    try:
        now = start_of_period("app", 60)
        assert claim_due_refreshes(redis, mirrors, now) == ["app"]
        assert claim_due_refreshes(redis, mirrors, now + 30 * 60) == []
        (result,) = run_due_refreshes(redis, mirrors, now + 60 * 60)  # no mirror yet: the poll clones
        assert result.ok and mirrors.current("app") is not None
    finally:
        stop_embedded_server(mirrors.settings)


def test_a_failed_ls_remote_names_the_remote_without_its_credential(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as probe:  # a port nothing listens on: the remote is down
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://codebot:s3cr3t-token-9f2e@127.0.0.1:{port}/acme/app.git"
    _, mirrors, redis = setup(tmp_path, {"url": url, "refresh_minutes": 5})
    try:
        assert not mirrors.sync("app").ok  # the mirror exists, the remote never answered
        with caplog.at_level(logging.WARNING):
            (result,) = run_due_refreshes(redis, mirrors)
        assert "git ls-remote failed" in caplog.text  # said, then the fetch tried anyway
        assert not result.ok and "127.0.0.1" in (result.error or "")
        assert "s3cr3t-token-9f2e" not in caplog.text + (result.error or "")
    finally:
        stop_embedded_server(mirrors.settings)
