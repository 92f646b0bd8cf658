"""A tool call blocked in the kernel ends at the question's deadline, and the pool keeps its threads.

A read on a hung mount never returns; here the block is a real one in the kernel: the tool
opens a FIFO that no writer ever opens (the test releases it at its end by opening one). The
agent, the registry, the tools and the openai client are the real ones; the model is a real
HTTP server. What is asserted is what the asker is told and what the pool reports, never how
long anything took: the questions have a short deadline (4 s) and the tests wait for events.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from config.settings import Settings, load_settings
from tests.support.fixture_repos import Corpus, make_repo, snapshot_repo
from tests.support.model_server import Reply, ScriptedModel, text, tool_calls
from tests.support.stuck import blocked_on, wrapped
from worker.agent import tool_round
from worker.agent.loop import Agent, AgentResult
from worker.agent.model_errors import ModelFailure
from worker.agent.tool_pool import PoolState, ToolPool
from worker.agent.tool_round import ToolRound
from worker.jobs.question import Question, ReplyTarget
from worker.repos.snapshot import Snapshot
from worker.tools import make_context
from worker.tools.registry import ToolRegistry

WAIT = 60.0  # seconds an event may take on a busy machine; a pass never waits this long
READ = ("read_file", {"repo": "app", "path": "src/app.py"})
OVERVIEW = ("repo_overview", {"repo": "app"})
QUESTION = Question(
    id="q-stuck", asker="U1", target=ReplyTarget(platform="slack", channel="C1"), text="where?", repos=["app"]
)


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as server:
        yield server


@pytest.fixture(scope="module")
def settings(model: ScriptedModel) -> Settings:
    return load_settings(
        env_file=None,
        openai_base_url=model.base_url,
        openai_api_key="k",
        model_max_retries=0,
        question_deadline_seconds=4,
    )


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> ToolPool:
    """A pool of its own for the test: two threads, one stuck thread replaced."""
    own = ToolPool(2, 1)
    monkeypatch.setattr(tool_round, "_pool", own)
    monkeypatch.setattr(tool_round, "_pool_pid", os.getpid())
    return own


@pytest.fixture
def never_written(tmp_path: Path) -> Iterator[Path]:
    """A FIFO no writer opens until the test ends: opening it for reading blocks in the kernel."""
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)
    yield fifo
    with contextlib.suppress(OSError):  # a writer comes and goes: every blocked reader returns
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def ask(
    settings: Settings,
    snapshot: Snapshot,
    model: ScriptedModel,
    tools: ToolRegistry,
    *replies: Reply,
) -> AgentResult | BaseException | None:
    """One question whose model replies `replies`, run in a thread: its result, what it raised,
    or None when it had not ended after WAIT."""
    ended: list[AgentResult | BaseException] = []
    client = openai.OpenAI(base_url=model.base_url, api_key="k", max_retries=0)
    agent = Agent(settings, client, tools, make_context(settings, {"app": snapshot}))
    model.enqueue(*replies)

    def run() -> None:
        try:
            ended.append(agent.run(QUESTION))
        except BaseException as exc:
            ended.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(WAIT)
    return ended[0] if ended else None


def test_a_read_blocked_in_the_kernel_ends_the_question_at_its_deadline_with_a_warning_naming_it(
    settings: Settings, corpus: Corpus, model: ScriptedModel, pool: ToolPool, never_written: Path
) -> None:
    ended = ask(settings, corpus.app, model, wrapped(read_file=blocked_on(never_written)), tool_calls(READ))
    assert isinstance(ended, ModelFailure), ended  # not "No matches", not a crash
    assert ended.kind == "tool_stuck"
    assert str(ended).startswith("read_file of `app/src/app.py` did not return within 4 s: the disk or mount")
    state = pool.state()
    assert (state.stuck, state.capacity, state.exhausted) == (1, 2, False)  # its thread was replaced


def test_a_question_is_answered_while_a_thread_is_stuck_and_the_pool_is_whole_once_the_read_returns(
    settings: Settings, corpus: Corpus, model: ScriptedModel, pool: ToolPool, never_written: Path
) -> None:
    changes: list[int] = []
    whole = threading.Event()

    def heard(state: PoolState) -> None:
        changes.append(state.stuck)
        if state.stuck == 0:
            whole.set()

    pool.on_change(heard)
    stuck = ask(settings, corpus.app, model, wrapped(read_file=blocked_on(never_written)), tool_calls(READ))
    assert isinstance(stuck, ModelFailure) and stuck.kind == "tool_stuck"
    answered = ask(
        settings, corpus.app, model, wrapped(), tool_calls(READ), text("In [app:src/app.py#L4-L5].")
    )
    assert isinstance(answered, AgentResult) and answered.outcome == "answered"
    os.close(os.open(never_written, os.O_WRONLY | os.O_NONBLOCK))  # the mount comes back
    assert whole.wait(WAIT)
    assert changes == [1, 0]
    assert pool.state() == PoolState(size=2, busy=0, stuck=0, spare=1)


def test_once_every_thread_is_stuck_a_question_is_told_its_call_could_not_start_and_the_pool_says_exhausted(
    settings: Settings,
    corpus: Corpus,
    model: ScriptedModel,
    monkeypatch: pytest.MonkeyPatch,
    never_written: Path,
) -> None:
    one = ToolPool(1, 0)  # one thread, none replaced
    monkeypatch.setattr(tool_round, "_pool", one)
    monkeypatch.setattr(tool_round, "_pool_pid", os.getpid())
    first = ask(settings, corpus.app, model, wrapped(read_file=blocked_on(never_written)), tool_calls(READ))
    assert isinstance(first, ModelFailure) and first.kind == "tool_stuck"
    assert one.state().exhausted
    second = ask(settings, corpus.app, model, wrapped(), tool_calls(READ))
    assert isinstance(second, ModelFailure) and second.kind == "tool_not_started"
    assert str(second).startswith(
        "read_file of `app/src/app.py` could not start within 4 s: every tool thread"
    )


def test_a_fifo_in_place_of_a_readme_is_never_opened_and_a_hundred_such_questions_leave_the_pool_whole(
    settings: Settings, model: ScriptedModel, pool: ToolPool, tmp_path: Path
) -> None:
    make_repo(tmp_path / "repo", {"README.md": "# app\n", "src/app.py": "def retry_job(job):\n    pass\n"})
    snapshot = snapshot_repo(tmp_path / "repo", "app", tmp_path / "snapshots" / "app")
    (snapshot.root / "README.md").unlink()
    os.mkfifo(snapshot.root / "README.md")  # a read of it would wait for a writer forever
    tools = wrapped()
    for _ in range(100):
        ended = ask(settings, snapshot, model, tools, tool_calls(OVERVIEW), text("It has a README."))
        assert isinstance(ended, AgentResult), ended
    assert (
        "(README.md is not a regular file (a FIFO), so it is not read"
        in model.requests[-1]["messages"][-1]["content"]
    )
    answered = ask(settings, snapshot, model, tools, tool_calls(READ), text("In [app:src/app.py#L1]."))
    assert isinstance(answered, AgentResult) and answered.outcome == "answered"
    assert pool.state() == PoolState(size=2, busy=0, stuck=0, spare=1)


def never_exiting(tmp_path: Path, name: str, when: str, real: str) -> Path:
    """A folder holding `name`: it runs `real` unless one of its arguments is `when`, then it
    never exits (a git or rg hung on a stuck disk, as far as its caller can tell)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    script = folder / name
    script.write_text(
        f'#!/bin/sh\nfor a in "$@"; do [ "$a" = {when} ] && exec sleep 600; done\nexec {real} "$@"\n'
    )
    script.chmod(0o755)
    return folder


def test_a_git_that_never_exits_is_stopped_at_the_question_deadline_and_holds_no_thread(
    settings: Settings,
    corpus: Corpus,
    model: ScriptedModel,
    pool: ToolPool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = never_exiting(tmp_path, "git", "log", shutil.which("git") or "git")
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    patient = settings.model_copy(update={"history_timeout_seconds": 600.0})  # the deadline comes first
    ended = ask(patient, corpus.app, model, wrapped(), tool_calls(("log", {"repo": "app"})))
    assert isinstance(ended, ModelFailure), ended
    assert ended.kind == "deadline" and str(ended).startswith("the question's time (4 s) ran out")
    assert pool.state() == PoolState(size=2, busy=0, stuck=0, spare=1)  # git was killed, its thread free


def test_a_ripgrep_that_never_exits_ends_at_the_deadline_as_a_search_that_ran_out_of_time_not_no_matches(
    settings: Settings, corpus: Corpus, pool: ToolPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rg = tmp_path / "rg"
    rg.write_text("#!/bin/sh\nexec sleep 600\n")  # whatever it is asked, it never answers
    rg.chmod(0o755)
    monkeypatch.setattr("worker.tools.search_command.find_ripgrep", lambda: str(rg))
    ctx = make_context(settings, {"app": corpus.app})
    ctx.deadline = time.monotonic() + 1
    calls: ToolRound[Any] = ToolRound(ctx.deadline)
    slot = calls.start(
        "search", lambda: wrapped().call(ctx, "search", {"pattern": "retry_job", "repo": "app"})
    )
    outcome = calls.result(slot)
    assert outcome.text.startswith("[search timed out after")
    assert "Nothing found for 'retry_job' in repo app before the time ran out" in outcome.text
    assert "No matches" not in outcome.text
    assert pool.state() == PoolState(size=2, busy=0, stuck=0, spare=1)  # rg was killed, its thread free
