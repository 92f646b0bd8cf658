"""An upgrade in place heals itself: the previous release's data dir and Redis, with questions
still queued, are answered by this release without an operator command.

The previous release is a real checkout of this repository: the commit before the processed
blob store (`PREVIOUS_RELEASE`), whose snapshots are raw `git archive`s (format 1, which this
release never serves) and whose `codebot repos sync` records no commit in Redis. Its own code
syncs the mirror and queues the questions; then this release's worker answers them.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
from rq import Queue, SimpleWorker

from codebot.wiring import build_runtime
from config.settings import load_settings
from tests.support.e2e import DEFAULT_FILES
from tests.support.fixture_repos import make_repo
from tests.support.model_server import ScriptedModel, text, tool_calls
from worker.jobs import runtime as runtime_module
from worker.jobs.queue import QUESTIONS_QUEUE
from worker.jobs.sink import read_console_events
from worker.ops.redis_connection import connect, stop_embedded_server
from worker.repos.refresh import wanted_sha

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PREVIOUS_RELEASE = "270e2e2c23393e2776d061fb2f05a5da313c0cce"  # before 8010c3f, the processed blob store
READ_RETRY = ("read_file", {"repo": "payments", "path": "payments/retry.py", "start_line": 1, "end_line": 13})
ANSWER = "It retries 5 times [payments:payments/retry.py#L3]."
QUEUE_TWO = """
    import sys
    from config.settings import load_settings
    from worker.jobs.question import Question, ReplyTarget
    from worker.jobs.queue import enqueue_question
    from worker.ops.redis_connection import connect
    settings = load_settings()
    redis = connect(settings)
    for n in (1, 2):
        target = ReplyTarget(platform="console", channel="console")
        question = Question(id=f"console-old-{n}", asker="old", target=target, text="how does retry work?",
                            repos=["payments"])
        enqueue_question(redis, question, settings)
"""


def previous_release(tmp: Path) -> Path:
    """The previous release's code, from this repository's own history (git archive)."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the previous release's code is not at hand")
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", PREVIOUS_RELEASE],
        capture_output=True,
        check=True,
    ).stdout
    code = tmp / "previous"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(code, filter="data")
    return code


def run_previous(code: Path, env: dict[str, str], *args: str) -> str:
    """Run the previous release's code (its own modules first on the path) in its own directory."""
    done = subprocess.run(
        [sys.executable, *args],
        cwd=code,
        env={**os.environ, **env, "PYTHONPATH": str(code)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_questions_queued_by_the_previous_release_are_answered_after_an_upgrade_in_place(
    tmp_path: Path,
) -> None:
    source = tmp_path / "payments-src"
    make_repo(source, DEFAULT_FILES)
    repos_file = tmp_path / "repos.toml"
    repos_file.write_text(f'[[repo]]\nname = "payments"\nurl = "{source}"\n', encoding="utf-8")
    env = {"CODEBOT_DATA_DIR": str(tmp_path / "data"), "CODEBOT_REPOS_FILE": str(repos_file)}
    old = previous_release(tmp_path)
    run_previous(old, env, "-c", "from codebot.cli import main; main()", "repos", "sync")
    run_previous(old, env, "-c", textwrap.dedent(QUEUE_TWO))
    model = ScriptedModel()
    settings = load_settings(
        env_file=None,
        data_dir=tmp_path / "data",
        repos_file=repos_file,
        openai_base_url=model.base_url,
        openai_api_key="test",
        model_max_retries=0,
    )
    try:
        redis = connect(settings)
        assert wanted_sha(redis, "payments") is None  # the previous release recorded no commit
        runtime_module.install(build_runtime(settings))  # this release's worker, nothing run by hand
        for _ in range(2):
            model.enqueue(tool_calls(READ_RETRY), text(ANSWER))
        SimpleWorker([Queue(QUESTIONS_QUEUE, connection=redis)], connection=redis).work(burst=True)
        for n in (1, 2):
            events = list(read_console_events(redis, f"console-old-{n}", 5.0, poll_ms=100))
            (final,) = [data for kind, data in events if kind in ("answer", "failed")]
            assert "retries 5 times" in str(final), events
        assert wanted_sha(redis, "payments") is not None  # recorded: every machine follows it now
    finally:
        model.close()
        stop_embedded_server(settings)
