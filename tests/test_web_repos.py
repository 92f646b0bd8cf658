"""The console's Repos page tells the truth about syncs: real git remotes (one that does not
exist), a real Redis, a real recorder and SQLite history, the console's app on uvicorn, plain
HTTP. A repo that failed every sync shows its failures and last error; a repo never cloned on
this machine claims neither "this machine" nor a history depth."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis
from sqlalchemy import Engine

from bot.web.app import build_app
from config.settings import Settings, load_settings
from tests.support.console_rig import OPERATOR_TOKEN, request, serving
from tests.support.git_remote import GitRemote, write_whitelist
from tests.support.redis_servers import redis_server
from worker.history.recorder import Recorder
from worker.history.store import open_engine, upgrade
from worker.jobs.runtime import Runtime, build_runtime
from worker.repos.refresh import catch_up, record_refresh

BEARER = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[Redis]:
    with redis_server(tmp_path) as server:
        yield server.client()


@pytest.fixture
def runtime(tmp_path: Path) -> Runtime:
    """`app` from a real remote, `gone` from a remote that does not exist."""
    remote = GitRemote.create(tmp_path / "origin")
    entries = [
        {"name": "app", "url": str(remote.bare)},
        {"name": "gone", "url": str(tmp_path / "nowhere.git")},
    ]
    write_whitelist(tmp_path / "conf", entries)
    settings: Settings = load_settings(
        env_file=None,
        data_dir=tmp_path / "data",
        repos_file=tmp_path / "conf" / "repos.toml",
        web_token=OPERATOR_TOKEN,
        catch_up_retry_seconds=0,  # each catch-up tries the dead remote again
    )
    return build_runtime(settings)


def refresh_both(redis: Redis, runtime: Runtime) -> None:
    """Each repo synced once as an admin refresh records it: `app` succeeds, `gone` fails."""
    for name in ("app", "gone"):
        record_refresh(redis, runtime.mirrors, runtime.mirrors.sync(name), "worker-a")


def repos_page(runtime: Runtime, redis: Redis, history: Engine | None = None) -> str:
    with serving(build_app(runtime, redis, history=history)) as base:
        status, _, body = request(base + "/repos", BEARER)
    assert status == 200
    return body


COLUMNS = ("repo", "commit", "last good sync", "by", "history", "disk", "failed syncs", "last error")


def row_of(body: str, name: str) -> dict[str, str]:
    """The Repos table's row of `name`, each cell's text by its column's header."""
    rows = re.findall(r'<tr class="repo"[^>]*>(.*?)</tr>', body, re.S)
    row = next(row for row in rows if f"<strong>{name}</strong>" in row)
    cells = [re.sub(r"<[^>]+>", "", text).strip() for text in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
    return dict(zip(COLUMNS, cells, strict=True))


def syncs_of(body: str, name: str) -> str:
    """The section listing the syncs of `name`."""
    start = body.index(f"<h2>Syncs of {name}</h2>")
    return body[start : body.index("</section>", start)]


def test_a_repo_that_failed_every_sync_shows_each_failure_and_its_last_error_from_the_history(
    tmp_path: Path, redis: Redis, runtime: Runtime
) -> None:
    refresh_both(redis, runtime)
    for _ in range(2):  # catch-ups: recorded only in the history, never in Redis's list of syncs
        assert not catch_up(runtime.mirrors, redis, ["gone"])["gone"].ok
    engine = open_engine(f"sqlite:///{tmp_path / 'history.sqlite3'}")
    upgrade(engine)
    Recorder(redis, engine, "test").run(threading.Event(), drain=True)
    body = repos_page(runtime, redis, engine)
    gone = row_of(body, "gone")
    assert gone["failed syncs"] == "3 of 3" and "nowhere.git" in gone["last error"]
    assert syncs_of(body, "gone").count('<tr class="failed">') == 3
    assert row_of(body, "app")["failed syncs"] == "0 of 1"


def test_a_repo_never_cloned_here_says_so_instead_of_this_machine_and_a_history_depth(
    redis: Redis, runtime: Runtime
) -> None:
    refresh_both(redis, runtime)
    body = repos_page(runtime, redis)  # no history database: Redis's list of syncs
    gone, app = row_of(body, "gone"), row_of(body, "app")
    assert (gone["by"], gone["history"]) == ("–", "not cloned here")
    assert gone["failed syncs"] == "1" and "nowhere.git" in gone["last error"]
    assert app["by"] == "worker-a" and app["history"].endswith("commits")
