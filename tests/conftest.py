"""Every test gets a clean environment: no variables of ours, no .env, a git identity."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from worker.agent.endpoint_memory import forget_in_process

_OURS = ("CODEBOT_", "REDIS_URL", "OPENAI_", "SLACK_", "DISCORD_")


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
    yield
