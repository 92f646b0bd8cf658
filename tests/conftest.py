"""Every test gets a clean environment (no variables of ours, no .env, a git identity), and the
shared fixtures: `rig` (per test, its kind chosen by a `rig` marker), `drig` (the Discord rig)
and `corpus` (tool tests)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.discord_rig import DiscordRig, discord_rig
from tests.support.e2e import build_rig
from tests.support.fixture_repos import Corpus, shared_corpus
from tests.support.hostile_slack import build_hostile_slack_rig
from tests.support.slack_rig import build_slack_rig
from worker.agent import concurrency
from worker.agent.endpoint_memory import forget_in_process

RIG_BUILDERS: dict[str, Callable[..., Iterator[Any]]] = {
    "e2e": build_rig,
    "slack": build_slack_rig,
    "hostile_slack": build_hostile_slack_rig,
}

_OURS = ("CODEBOT_", "REDIS_URL", "OPENAI_", "SLACK_", "DISCORD_")

# A `slow` test (real worker processes, faults, fuzzing) takes up to a minute on an idle machine
# and several at load 16 on 2 cores: pyproject's 120 s would fail it there for no fault of the
# code. Its own bound; a test's own `timeout` marker still wins.
SLOW_TEST_TIMEOUT_SECONDS = 600


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TEST_TIMEOUT_SECONDS))


@pytest.fixture(autouse=True)
def clean_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith(_OURS):
            monkeypatch.delenv(name)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)  # so no developer .env or ./data is ever picked up
    monkeypatch.setenv("GIT_AUTHOR_NAME", "codebot tests")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "tests@codebot.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "codebot tests")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "tests@codebot.invalid")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")
    forget_in_process()  # what a model endpoint accepts is learned per test (ports are reused)
    concurrency.forget()  # ... and the requests it was seen serving at once
    yield


@pytest.fixture
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The test module's rig, fresh per test. Its kind and settings come from a marker, e.g.
    `pytestmark = pytest.mark.rig("slack", admins="slack:UADMIN")`; unmarked: the end-to-end Rig
    (tests/support/e2e.py). Kinds: "e2e", "slack" (tests/support/slack_rig.py), "hostile_slack"
    (tests/support/hostile_slack.py)."""
    marker = request.node.get_closest_marker("rig")
    kind = marker.args[0] if marker is not None and marker.args else "e2e"
    overrides = dict(marker.kwargs) if marker is not None else {}
    yield from RIG_BUILDERS[kind](tmp_path, **overrides)


@pytest.fixture
def drig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DiscordRig]:
    """The Discord rig (tests/support/discord_rig.py): the real discord.py adapter on the fake
    gateway, the end-to-end rig behind it; settings from a `drig` marker's keywords."""
    marker = request.node.get_closest_marker("drig")
    with discord_rig(tmp_path, **(dict(marker.kwargs) if marker is not None else {})) as rig:
        yield rig


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """The hostile corpus of real repos and snapshots the tool tests read (built once a session)."""
    return shared_corpus(tmp_path_factory)
