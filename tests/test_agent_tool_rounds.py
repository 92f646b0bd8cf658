"""The tool calls of one model turn run at the same time; the model gets every result, in its order.

The agent, the registry, the real tools (over the hostile corpus) and the openai client are the
real ones; the model is a real HTTP server. A test seam wraps a tool so that it can wait for
another call of the same turn (which, run one by one, would never come): that proves the calls
overlap by what happened, not by a clock.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest

from config.settings import Settings, load_settings
from tests.support.fixture_repos import Corpus
from tests.support.model_server import ScriptedModel, text, tool_calls
from worker.agent import tool_round
from worker.agent.loop import Agent, AgentResult
from worker.agent.tool_pool import ToolPool
from worker.jobs.job_timeouts import raise_in_thread
from worker.jobs.question import Question, ReplyTarget
from worker.jobs.threaded_worker import StopJobRequested
from worker.tools import TOOL_FUNCTIONS, ToolContext, make_context
from worker.tools.registry import ToolRegistry

READ = ("read_file", {"repo": "app", "path": "src/app.py"})
SEARCH = ("search", {"pattern": "retry_job", "repo": "app"})
LIST = ("list_files", {"repo": "app", "path": "src"})
QUESTION = Question(
    id="q-rounds",
    asker="U1",
    target=ReplyTarget(platform="slack", channel="C1"),
    text="where?",
    repos=["app"],
)


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as server:
        yield server


@pytest.fixture(scope="module")
def settings(model: ScriptedModel) -> Settings:
    return load_settings(
        env_file=None, openai_base_url=model.base_url, openai_api_key="k", model_max_retries=0
    )


def registry(**wrappers: Callable[[Callable[..., Any]], Callable[..., Any]]) -> ToolRegistry:
    """The real tools, some wrapped (same name, schema and docstring)."""
    functions = []
    for function in TOOL_FUNCTIONS:
        wrap = wrappers.get(function.__name__)
        functions.append(functools.wraps(function)(wrap(function)) if wrap else function)
    return ToolRegistry(functions)


def ask(
    settings: Settings, corpus: Corpus, model: ScriptedModel, tools: ToolRegistry, *calls: Any
) -> tuple[AgentResult, list[str], list[dict[str, Any]]]:
    """One question whose first turn makes `calls`: (result, progress lines, tool messages sent)."""
    progress: list[str] = []
    client = openai.OpenAI(base_url=model.base_url, api_key="k", max_retries=0)
    agent = Agent(
        settings, client, tools, make_context(settings, {"app": corpus.app}), progress=progress.append
    )
    since = len(model.requests)
    model.enqueue(tool_calls(*calls), text("It is in [app:src/app.py#L4-L5]."))
    result = agent.run(QUESTION)
    sent = model.requests[since + 1]["messages"]
    return result, progress, [m for m in sent if m["role"] == "tool"]


def test_the_calls_of_one_turn_run_together_and_reach_the_model_in_its_order_even_when_the_first_is_slowest(
    settings: Settings, corpus: Corpus, model: ScriptedModel
) -> None:
    listed = threading.Event()
    saw_listing: list[bool] = []

    def read_after_the_listing(read: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            saw_listing.append(listed.wait(60))  # run one by one, the listing would come only after
            return read(*args, **kwargs)

        return run

    def listing(list_files: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return list_files(*args, **kwargs)
            finally:
                listed.set()

        return run

    tools = registry(read_file=read_after_the_listing, list_files=listing)
    result, progress, replies = ask(settings, corpus, model, tools, READ, SEARCH, LIST)
    assert saw_listing == [True]
    calls = next(m for m in model.requests[-1]["messages"] if m.get("tool_calls"))["tool_calls"]
    assert [r["tool_call_id"] for r in replies] == [c["id"] for c in calls]
    assert "def retry_job" in replies[0]["content"] and "src/app.py" in replies[1]["content"]
    assert "app.py" in replies[2]["content"] and not replies[2]["content"].startswith("Error")
    assert progress == [
        "reading `src/app.py` from L1 in app",
        "searching `retry_job` in app",
        "listing `src` in app",
    ]
    assert (result.tool_calls, result.usable_tool_calls, result.outcome) == (3, 3, "answered")


def test_a_failing_call_is_reported_as_failed_and_the_other_calls_of_its_turn_still_answer(
    settings: Settings, corpus: Corpus, model: ScriptedModel
) -> None:
    def crash(_tool: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("a bug in the search tool")

        return run

    missing = ("read_file", {"repo": "app", "path": "src/nowhere.py"})
    result, progress, replies = ask(settings, corpus, model, registry(search=crash), missing, SEARCH, LIST)
    assert replies[0]["content"].startswith("Error:") and "nowhere.py" in replies[0]["content"]
    assert replies[1]["content"].startswith("Error: the tool failed unexpectedly (RuntimeError)")
    assert "app.py" in replies[2]["content"] and not replies[2]["content"].startswith("Error")
    assert (result.tool_calls, result.usable_tool_calls) == (3, 1)
    assert progress[:3] == [
        "reading `src/nowhere.py` from L1 in app",
        "searching `retry_job` in app",
        "listing `src` in app",
    ]
    assert progress[3:] == [  # each failure on a line of its own, in the model's order
        "reading `src/nowhere.py` from L1 in app — failed: the tool answered with an error",
        "searching `retry_job` in app — failed: the tool answered with an error",
    ]
    assert [t.split(" ")[0] for t in result.trace] == ["read_file", "search", "list_files"]


def test_a_call_repeated_in_one_turn_runs_once_and_both_get_its_result(
    settings: Settings, corpus: Corpus, model: ScriptedModel
) -> None:
    cached_before: list[int] = []  # results the question had cached when each call began

    def counted(search: Callable[..., Any]) -> Callable[..., Any]:
        def run(ctx: ToolContext, **kwargs: Any) -> Any:
            cached_before.append(len(ctx.result_cache))
            return search(ctx, **kwargs)

        return run

    _result, _progress, replies = ask(settings, corpus, model, registry(search=counted), SEARCH, SEARCH)
    assert cached_before == [0, 1]  # the second began once the first had its result
    assert "src/app.py" in replies[0]["content"]
    assert replies[1]["content"].startswith("(You already ran this exact search; same result.)")


def test_a_stop_request_lands_in_the_question_while_its_tool_calls_are_still_running(
    settings: Settings, corpus: Corpus, model: ScriptedModel
) -> None:
    started, release = threading.Event(), threading.Event()

    def held(read: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            started.set()
            release.wait(60)
            return read(*args, **kwargs)

        return run

    raised: list[BaseException] = []
    own_model = ScriptedModel()  # its second reply is never asked for
    own = settings.model_copy(update={"openai_base_url": own_model.base_url})

    def question() -> None:
        try:
            ask(own, corpus, own_model, registry(read_file=held), READ)
        except BaseException as exc:  # what `rq stop-job` raises in a question's thread
            raised.append(exc)

    thread = threading.Thread(target=question)
    thread.start()
    assert started.wait(60)
    assert raise_in_thread(thread.ident or 0, StopJobRequested)
    thread.join(60)
    still_held = not release.is_set()
    release.set()
    own_model.close()
    assert still_held and [type(exc) for exc in raised] == [StopJobRequested]


def test_a_search_asked_for_after_a_read_starts_first_and_the_model_still_gets_its_order(
    settings: Settings, corpus: Corpus, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    began: list[str] = []

    def noting(tool: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            began.append(tool.__name__)
            return tool(*args, **kwargs)

        return run

    # one thread: the calls run in the order they were started
    monkeypatch.setattr(tool_round, "_pool", ToolPool(1, 1))
    monkeypatch.setattr(tool_round, "_pool_pid", os.getpid())
    tools = registry(read_file=noting, search=noting, list_files=noting)
    result, progress, replies = ask(settings, corpus, model, tools, READ, LIST, SEARCH)
    assert began == ["search", "read_file", "list_files"]  # the one waiting on ripgrep first
    assert "def retry_job" in replies[0]["content"] and "src/app.py" in replies[2]["content"]
    assert progress == [
        "reading `src/app.py` from L1 in app",
        "listing `src` in app",
        "searching `retry_job` in app",
    ]
    assert (result.tool_calls, result.usable_tool_calls) == (3, 3)
