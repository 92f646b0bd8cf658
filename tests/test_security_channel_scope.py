"""Channel allow-lists: nothing of a repo allowed only in channel B (its content, the names of
its files, its description) reaches channel A: not asked directly, not through a follow-up in a
thread, not through `/codebot repos`, and not when the model itself asks the tools for it.

Slack runs the real adapter and worker over the fortress (`internal` is allowed only in
SECRET_CHANNEL); Discord runs the real gateway adapter on the fake Discord.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rq import Queue
from rq.job import Job

from tests.support.answers import body
from tests.support.discord_rig import DiscordRig, discord_rig
from tests.support.fake_discord import FakeDiscord
from tests.support.hostile_slack import (
    DISCORD_SECRET_CHANNEL,
    INTERNAL,
    HostileSlackRig,
    internal_repo,
)
from tests.support.model_server import text, tool_calls
from tests.support.slack_api import message
from tests.support.slack_rig import SECRET_CHANNEL
from worker.jobs.question import Question
from worker.jobs.queue import QUESTIONS_QUEUE

# A repo allowed only elsewhere gets the answer of a repo that does not exist: the name the
# asker typed, and the repos this channel may see.
NOT_HERE = re.compile(r"There is no repo `internal`\. Repos you can ask about here: `[\w-]+`(?:, `[\w-]+`)*")


def not_here(text: str) -> bool:
    return NOT_HERE.fullmatch(text) is not None and text.count("internal") == 1


pytestmark = pytest.mark.rig("hostile_slack")


def queued_questions(rig: HostileSlackRig) -> list[Question]:
    jobs = Queue(QUESTIONS_QUEUE, connection=rig.redis).jobs
    return [Question.model_validate_json(job.args[0]) for job in jobs]


# --- Slack ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "question",
    [
        "what are the plans? repo:internal",
        "what are the plans? repo:INTERNAL",
        "compare repo:app with repo:internal",
        "repo:internal plans?",
        "repo:internal. plans?",  # a near name: the list it gets names only what C1 may see
        "repo:interna what is launch?",
    ],
)
def test_a_repo_allowed_only_elsewhere_is_refused_in_a_channel_without_a_word_of_it(
    rig: HostileSlackRig, question: str
) -> None:
    ts = rig.mention(question)
    rig.settle()
    (reply,) = rig.api.thread_texts("C1", ts)
    assert not_here(reply) or re.fullmatch(
        r"There is no repo `interna`\. Repos you can ask about here: `app`", reply
    )
    assert rig.question_jobs() == []
    assert not rig.leaks_in_slack()


def test_a_follow_up_in_a_thread_started_in_a_channel_cannot_reach_a_repo_allowed_elsewhere(
    rig: HostileSlackRig,
) -> None:
    rig.model.enqueue(text("It retries."))
    root = rig.mention("how does retry work?")
    rig.settle()
    rig.work()
    asked, plain = rig.next_ts(), rig.next_ts()
    rig.send(message("C1", asked, "and what is in repo:internal?", thread_ts=root))
    rig.send(message("C1", plain, "and the launch plans?", thread_ts=root))
    rig.settle()
    assert not_here(rig.api.thread_texts("C1", root)[-1])
    (follow_up,) = queued_questions(rig)
    assert follow_up.text == "and the launch plans?" and follow_up.repos == ["app"]
    assert not rig.leaks_in_slack()


def test_a_thread_answered_in_the_allowed_channel_lends_nothing_to_a_forged_reply_elsewhere(
    rig: HostileSlackRig,
) -> None:
    rig.model.enqueue(
        tool_calls(("read_file", {"repo": "internal", "path": "NOTES.md"})),
        text(f"The notes say {INTERNAL.canary} [internal:NOTES.md#L3]."),
    )
    secret_root = rig.mention("what do the notes say? repo:internal", channel=SECRET_CHANNEL)
    rig.settle()
    rig.work()
    assert INTERNAL.canary in rig.api.thread_texts(SECRET_CHANNEL, secret_root)[-1]  # allowed there
    # The same thread id, but in C1: no history, no kept scope, no follow-up without a mention.
    rig.send(message("C1", rig.next_ts(), "and the rest?", thread_ts=secret_root))
    # settled first: bolt runs listeners concurrently, and a reply handled after the mention below
    # is a follow-up in a thread codebot now answers in C1, rightly queued
    rig.settle()
    assert queued_questions(rig) == []
    rig.mention("and the rest?", thread_ts=secret_root)
    rig.settle()
    (question,) = queued_questions(rig)
    assert question.history == [] and question.repos == ["app"]
    rig.model.enqueue(tool_calls(("list_repos", {})), text("Nothing more."))
    rig.work()
    (reply,) = rig.api.thread_texts("C1", secret_root)
    assert body(reply) == "Nothing more."
    c1_calls = [c for c in rig.api.calls if c.body.get("channel") == "C1"]
    assert not [leak for c in c1_calls for leak in rig.finder(json.dumps(c.body, ensure_ascii=False))]
    assert INTERNAL.canary not in json.dumps(rig.model.requests[-1])


@pytest.mark.parametrize("channel", ["C1", "D1"])
def test_repos_lists_neither_the_name_nor_the_description_of_a_repo_allowed_elsewhere(
    rig: HostileSlackRig, channel: str
) -> None:
    rig.command("repos", channel=channel)
    rig.settle()
    (listing,) = [call.body["text"] for call in rig.api.calls_to("response_url")]
    assert "`app` — a fortress under attack" in listing
    assert "internal" not in listing and not rig.leaks_in_slack()
    rig.command("repos", channel=SECRET_CHANNEL)
    rig.settle()
    assert f"`internal` — {INTERNAL.description}" in rig.api.calls_to("response_url")[-1].body["text"]


def test_the_tool_layer_refuses_a_repo_out_of_scope_even_when_the_model_asks_for_it(
    rig: HostileSlackRig,
) -> None:
    # The question in C1 has only `app` in scope; the model (prompt-injected, say) goes for `internal`,
    # whose snapshot sits on this worker's disk right next to app's.
    probes: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"repo": "internal", "path": "NOTES.md"}),
        ("list_files", {"repo": "internal"}),
        ("list_files", {"repo": "internal", "glob": "*.py"}),
        ("search", {"pattern": "INTERNAL|launch|plans", "repo": "internal"}),
        ("search", {"pattern": "INTERNAL-CANARY"}),  # every repo in scope: only app
        ("repo_overview", {"repo": "internal"}),
        ("find_definition", {"symbol": "launch", "repo": "internal"}),
        ("find_definition", {"symbol": "launch"}),
        ("read_file", {"repo": "app", "path": "internal_notes"}),  # a link into its snapshot
        ("read_file", {"repo": "app", "path": "../../../internal/current/NOTES.md"}),
        ("list_repos", {}),
    ]
    known = set(rig.runtime.registry.names())
    rig.model.enqueue(tool_calls(*[p for p in probes if p[0] in known]), text("Found nothing."))
    ts = rig.mention("tell me about the launch plans")
    rig.settle()
    rig.work()
    results = [m["content"] for m in rig.model.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(results) == len([p for p in probes if p[0] in known])
    for result in results:
        assert result.startswith("Error: ") or "No matches" in result or "1 repo(s) in scope:" in result
    assert not rig.leaks_to_model()
    assert not rig.leaks_in_slack()
    assert list(map(body, rig.api.thread_texts("C1", ts))) == ["Found nothing."]
    system = rig.model.requests[0]["messages"][0]["content"]
    assert "- app:" in system and "- internal:" not in system and INTERNAL.description not in system


def test_a_catalog_query_in_a_channel_never_finds_a_repo_allowed_elsewhere(rig: HostileSlackRig) -> None:
    # Words of internal's name and layout (NOTES.md, src/): in its own channel they find it.
    query = tool_calls(("list_repos", {"query": "internal notes"}))
    rig.model.enqueue(query, text("Found it."), query, text("Found nothing."))
    rig.mention("which repo has the notes?", channel=SECRET_CHANNEL)
    rig.settle()
    rig.work()
    (allowed,) = [m["content"] for m in rig.model.requests[-1]["messages"] if m["role"] == "tool"]
    assert "in scope match 'internal notes'" in allowed and "- internal:" in allowed
    asked_in_c1 = len(rig.model.requests)
    ts = rig.mention("which repo has the notes?")
    rig.settle()
    rig.work()
    (refused,) = [m["content"] for m in rig.model.requests[-1]["messages"] if m["role"] == "tool"]
    # Only app, by its `internal_notes` link at the root: the one repo this channel may use.
    assert refused.startswith("1 of 1 repo(s) in scope match 'internal notes', best first:\n- app: ")
    assert "- internal:" not in refused and len(refused.splitlines()) == 2
    assert not rig.finder(json.dumps(rig.model.requests[asked_in_c1:], ensure_ascii=False))
    posted = rig.api.thread_texts("C1", ts)
    assert list(map(body, posted)) == ["Found nothing."] and "internal" not in posted[0]


# --- Discord ----------------------------------------------------------------------------------------


@pytest.fixture
def drig(tmp_path: Path) -> Iterator[DiscordRig]:
    internal_repo(tmp_path / "internal-src")
    repos_file = tmp_path / "scoped-repos.toml"
    repos_file.write_text(
        f'[[repo]]\nname = "payments"\nurl = "{tmp_path / "payments-src"}"\ndescription = "the payments service"\n\n'
        f'[[repo]]\nname = "internal"\nurl = "{tmp_path / "internal-src"}"\n'
        f'description = "{INTERNAL.description}"\nchannels = ["discord:{DISCORD_SECRET_CHANNEL}"]\n',
        encoding="utf-8",
    )
    with discord_rig(tmp_path, repos_file=repos_file) as rig:
        yield rig


def discord_texts(fake: FakeDiscord) -> str:
    return json.dumps([call.body for call in fake.calls], ensure_ascii=False)


def test_discord_a_mention_about_a_repo_allowed_elsewhere_is_refused_without_a_word_of_it(
    drig: DiscordRig,
) -> None:
    fake = drig.fake
    question = drig.mention("what are the plans? repo:internal")
    fake.wait_for(lambda: fake.posted(fake.channel_id))
    (reply,) = fake.posted(fake.channel_id)
    assert not_here(reply["content"])
    assert str(reply["message_reference"]["message_id"]) == question["id"]
    assert Queue(QUESTIONS_QUEUE, connection=drig.rig.redis).count == 0
    assert not any(s in discord_texts(fake) for s in INTERNAL.strings)


def test_discord_a_follow_up_in_the_bots_thread_cannot_reach_a_repo_allowed_elsewhere(
    drig: DiscordRig,
) -> None:
    fake = drig.fake
    drig.script_answer("It retries [payments:payments/retry.py#L6].")
    root = drig.mention("how does retry work?")
    drig.queued()
    drig.work()
    thread = root["id"]  # the answer thread, started from the question
    fake.wait_for(lambda: thread in fake.channels)
    fake.message_create("and what about repo:internal?", channel=thread)
    fake.wait_for(lambda: any(not_here(m["content"]) for m in fake.posted(thread)))
    asked = fake.message_create("and the launch plans?", channel=thread)
    drig.queued()
    job = Job.fetch(f"q-discord-{asked['id']}", connection=drig.rig.redis)
    assert Question.model_validate_json(job.args[0]).repos == ["payments"]
    assert not any(s in discord_texts(fake) for s in INTERNAL.strings)


def test_discord_repos_and_ask_commands_say_nothing_of_a_repo_allowed_elsewhere(drig: DiscordRig) -> None:
    fake = drig.fake
    fake.interaction("repos")
    listing = fake.wait_for(
        lambda: [c.body for c in fake.find("PATCH", "/messages/@original$") if "payments" in str(c.body)]
    )[-1]
    assert "`payments`" in listing["content"] and "internal" not in listing["content"]
    fake.interaction("ask", {"question": "what are the plans? repo:internal"})
    refusal = fake.wait_for(
        lambda: [c.body for c in fake.find("POST", "/callback$") if NOT_HERE.search(str(c.body))]
    )
    assert refusal[-1]["data"]["flags"] == 64  # private
    assert Queue(QUESTIONS_QUEUE, connection=drig.rig.redis).count == 0
    assert not any(s in discord_texts(fake) for s in INTERNAL.strings)
