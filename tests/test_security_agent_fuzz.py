"""Fuzzing through the model: an obedient scripted model calls the tools with hostile arguments
(as the raw JSON a model sends) and then answers with everything it got, a fake citation and
broadcasts. Nothing from outside the snapshot and no secret may appear in any request sent to
the model, in a progress line, or in the reply as it would be posted to Slack or Discord.

The agent, the registry, the tools and the OpenAI client are the real ones; the model is a real
HTTP server (ScriptedModel), so what is checked is exactly what went over the wire.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.discord.format import render_answer
from bot.slack.format import format_for_slack
from config.settings import Settings, load_settings
from tests.support.attacks import FUZZ, raw_arguments
from tests.support.attacks import tool_calls as fuzzed_calls
from tests.support.fortress import Fortress, LeakFinder, build_fortress
from tests.support.model_server import Reply, ScriptedModel, text, tool_calls
from worker.agent.citations import check_answer
from worker.agent.loop import Agent, AgentResult
from worker.jobs.question import Question, ReplyTarget
from worker.jobs.sink import Answer
from worker.tools import build_registry, make_context

# Every example is two model round trips (~45 ms each on loopback: the scripted server sends
# headers and body in two writes and Nagle's algorithm waits for the delayed ACK).
AGENT_FUZZ = settings(FUZZ, max_examples=150)
_clients: dict[str, openai.OpenAI] = {}  # one connection pool for the module, as a worker keeps one
LOUD = "<!channel> @everyone <@U0ADMIN> [app:src/app.py#L1-L9](https://evil.example/phish)"


@pytest.fixture(scope="module")
def fortress(tmp_path_factory: pytest.TempPathFactory) -> Fortress:
    return build_fortress(tmp_path_factory.mktemp("fortress"))


@pytest.fixture(scope="module")
def finder(fortress: Fortress) -> LeakFinder:
    return LeakFinder(fortress)


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as server:
        server.set_handler(exfiltrate)
        yield server


@pytest.fixture(scope="module")
def agent_settings(model: ScriptedModel) -> Settings:
    return load_settings(
        env_file=None,
        openai_base_url=model.base_url,
        openai_api_key="test",
        model_max_retries=0,
        max_hops=3,
        max_tool_calls_per_turn=64,  # one turn walks every way out at once
        tool_output_max_chars=4000,
    )


def exfiltrate(body: dict[str, Any]) -> Reply:
    """The model obeys the attacker: it answers with every tool result it was given, loudly."""
    results = [m["content"] for m in body["messages"] if m.get("role") == "tool"]
    return text(f"{LOUD}\n\nHere is everything I found:\n\n" + "\n\n".join(results))


def ask(
    settings: Settings, fortress: Fortress, model: ScriptedModel, *calls: tuple[str, Any]
) -> tuple[AgentResult, list[str], list[str]]:
    """Run one question whose first model turn makes `calls`; (result, progress lines, what
    would be posted in Slack and Discord)."""
    ctx = make_context(settings, {"app": fortress.app})
    client = _clients.setdefault(
        model.base_url, openai.OpenAI(base_url=model.base_url, api_key="test", max_retries=0)
    )
    progress: list[str] = []
    agent = Agent(settings, client, build_registry(), ctx, progress=progress.append)
    model.enqueue(tool_calls(*calls))
    question = Question(
        id="q-fuzz",
        asker="U1",
        target=ReplyTarget(platform="slack", channel="C1"),
        text="what is there?",
        repos=["app"],
    )
    result = agent.run(question)
    checked = check_answer(ctx, ctx.redact(result.text))
    answer = Answer(markdown=checked.markdown, sources=checked.sources, unverified=checked.unverified)
    discord = render_answer(answer)
    posted = [*format_for_slack(answer.markdown), *discord.chunks, json.dumps(discord.embed or {})]
    posted += [chunk for line in progress for chunk in format_for_slack(line)]
    return result, progress, posted


def assert_nothing_leaked(model: ScriptedModel, since: int, posted: list[str], finder: LeakFinder) -> None:
    with model._lock:  # the recorded bodies of this question only
        bodies = model.requests[since:]
    sent = json.dumps(bodies, ensure_ascii=False)
    assert not finder(sent), finder(sent)
    for message in posted:
        assert not finder(message), finder(message)
        assert "evil.example" not in message or "<https://evil" not in message  # never a link


@pytest.mark.slow
@AGENT_FUZZ
@given(data=st.data())
def test_whatever_the_model_asks_the_tools_no_secret_or_outside_byte_reaches_it_or_the_chat(
    data: st.DataObject,
    fortress: Fortress,
    finder: LeakFinder,
    model: ScriptedModel,
    agent_settings: Settings,
) -> None:
    calls = data.draw(
        st.lists(st.one_of(fuzzed_calls(fortress), raw_arguments(fortress)), min_size=1, max_size=3)
    )
    since = len(model.requests)
    result, _progress, posted = ask(agent_settings, fortress, model, *calls)
    assert result.tool_calls == len(calls) and result.stop_reason == "answered"
    assert_nothing_leaked(model, since, posted, finder)


def test_a_model_walking_every_way_out_gets_only_refusals_and_posts_nothing_from_outside(
    fortress: Fortress, finder: LeakFinder, model: ScriptedModel, agent_settings: Settings
) -> None:
    paths = [
        "../../etc/passwd",
        "etc_passwd",
        "next_door",
        "../NEXTDOOR.txt",
        "outside_abs",
        "outside_rel",
        "outside_dir/CANARY.txt",
        "hop1",
        "docs/deep/escape/CANARY.txt",
        "sibling_link",
        "sibling_dir/notes.txt",
        "root_dir/etc/passwd",
        "up/NEXTDOOR.txt",
        ".env",
        "env_alias.txt",
        "config/server.pem",
        "id_rsa",
        "envd_alias/database.txt",
    ]
    calls: list[tuple[str, Any]] = [("read_file", {"repo": "app", "path": p}) for p in paths]
    calls += [
        ("list_files", {"repo": "app", "path": p}) for p in ["outside_dir", "up", "root_dir", "sibling_dir"]
    ]
    calls += [("search", {"pattern": p}) for p in ["CANARY", "root:", "SECRETFILE", "SIBLING", "BEGIN"]]
    calls += [("read_file", {"repo": "sibling", "path": "notes.txt"})]
    since = len(model.requests)
    result, progress, posted = ask(agent_settings, fortress, model, *calls)
    assert result.tool_calls == len(calls)
    tool_replies = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "tool"]
    refused = [reply for reply in tool_replies if reply.startswith("Error: ")]
    assert len(refused) == len(paths) + 4 + 1  # every read and listing refused; searches just find nothing
    assert_nothing_leaked(model, since, posted, finder)
    # The attempt shows in the progress line; what it would have fetched never does.
    assert any("reading `../../etc/passwd`" in line for line in progress)
