"""Navigation over many repos: a name defined nowhere is answered from the host's name table
(a fixed number of queries, whatever the number of repos), its "did you mean" still spans the
repos in scope and only them, and a call that runs out of time says how far it got."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from typing import Any

import pytest

from config.settings import Settings, load_settings
from tests.support.fixture_repos import make_repo, snapshot_repo
from worker.repos.snapshot import Snapshot
from worker.tools import build_registry, make_context

REPOS = [f"svc{i}" for i in range(6)]


def _source(i: int) -> str:
    return f"def handle_order_{i}(order):\n    return order\n\n\ndef shared_helper():\n    return handle_order_{i}(1)\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, dict[str, Snapshot]]:
    base = tmp_path_factory.mktemp("many")
    settings = load_settings(env_file=None, data_dir=base / "data")
    snapshots = {}
    for i, name in enumerate(REPOS):
        files = {f"{name}/orders.py": _source(i)}
        if name == "svc0":  # a secret file (.env*): never parsed, so its names are in no table
            files[".env.py"] = "def planted_secret_loader():\n    return 1\n"
        make_repo(base / "repos" / name, files)
        snapshots[name] = snapshot_repo(
            base / "repos" / name, name, base / "snapshots" / name, settings=settings
        )
    return settings, snapshots


def call(settings: Settings, snapshots: dict[str, Snapshot], tool: str, **args: Any) -> str:
    ctx = make_context(settings, snapshots)
    return build_registry().call(ctx, tool, args).text


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every SQL statement run on a connection opened from now on."""
    run: list[str] = []
    connect = sqlite3.connect

    def counting(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db = connect(*args, **kwargs)
        db.set_trace_callback(run.append)
        return db

    monkeypatch.setattr(sqlite3, "connect", counting)
    yield run


def test_a_miss_across_six_repos_runs_the_queries_of_a_miss_across_two_and_suggests_from_the_sixth(
    world: tuple[Settings, dict[str, Snapshot]], statements: list[str]
) -> None:
    settings, snapshots = world
    two = {name: snapshots[name] for name in REPOS[:2]}

    call(settings, two, "find_definition", symbol="handle_ordr_5")
    across_two = len(statements)
    statements.clear()
    text = call(settings, snapshots, "find_definition", symbol="handle_ordr_5")

    assert text.startswith("Error: no definition of 'handle_ordr_5' in 6 repos.")
    assert "Did you mean: handle_order_5" in text
    assert len(statements) == across_two
    statements.clear()
    assert "no definition of 'handle_ordr_5'" in call(
        settings, snapshots, "find_references", symbol="handle_ordr_5"
    )
    assert len(statements) == across_two


def test_a_suggestion_never_names_what_only_a_secret_file_or_a_repo_out_of_scope_defines(
    world: tuple[Settings, dict[str, Snapshot]],
) -> None:
    settings, snapshots = world

    secret = call(settings, snapshots, "find_definition", symbol="planted_secret_loadr")
    out_of_scope = call(settings, {"svc1": snapshots["svc1"]}, "find_definition", symbol="handle_ordr_5")

    assert "no definition" in secret and "planted_secret_loader" not in secret
    assert "no definition" in out_of_scope and "handle_order_5" not in out_of_scope
    assert "Did you mean: handle_order_1" in out_of_scope


def test_a_lookup_whose_deadline_has_passed_says_it_ran_out_of_time_not_that_nothing_exists(
    world: tuple[Settings, dict[str, Snapshot]],
) -> None:
    settings, snapshots = world
    ctx = make_context(settings, snapshots)
    ctx.deadline = time.monotonic() - 1  # the question's time is already up

    definition = build_registry().call(ctx, "find_definition", {"symbol": "shared_helper"})
    uses = build_registry().call(ctx, "find_references", {"symbol": "handle_order_3"})

    for outcome in (definition, uses):
        assert "ran out of time after 0 of 6 repos" in outcome.text
        assert "no definition" not in outcome.text and "so one may exist there" in outcome.text
        assert dict(outcome.data or {})["timed_out"] is True


def test_a_lookup_that_runs_out_of_time_midway_shows_what_it_found_and_how_far_it_got(
    world: tuple[Settings, dict[str, Snapshot]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import worker.tools.navigation_lookup as lookup

    settings, snapshots = world
    late = {"by": 0.0}
    opened = lookup.open_index

    def open_then_time_passes(*args: Any) -> Any:
        index = opened(*args)
        late["by"] = 3600.0  # the first repo's lookup took the call's whole time
        return index

    clock = type("Clock", (), {"monotonic": staticmethod(lambda: time.monotonic() + late["by"])})
    monkeypatch.setattr(lookup, "time", clock)
    monkeypatch.setattr(lookup, "open_index", open_then_time_passes)

    text = call(settings, snapshots, "find_definition", symbol="shared_helper")

    assert text.startswith(
        "[ran out of time after 1 of 6 repos (time limit 10 s); the rest were not looked in"
    )
    assert "1 definition of 'shared_helper':" in text and "[svc0:svc0/orders.py#L5" in text
