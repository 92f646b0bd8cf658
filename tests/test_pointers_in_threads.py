"""A stack trace or a link in the thread a question is asked in (or in a pasted log) is read
for the model through the tool layer, as the question's own are: on Slack and Discord with the
real adapters and worker against the local fakes, and in the console with `--context`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from config.settings import load_settings
from tests.support.cli import run_codebot
from tests.support.discord_rig import DiscordRig
from tests.support.e2e import DEFAULT_FILES, Rig, build_rig
from tests.support.fixture_repos import git, make_repo
from tests.support.model_server import ScriptedModel, text
from tests.support.slack_rig import SlackRig, build_slack_rig
from worker.ops.redis_connection import stop_embedded_server
from worker.pointers.parse import find_versions
from worker.tools import ToolRegistry, make_context
from worker.tools.history_file import read_file_at

WEB = "https://github.com/acme/payments"
TOKEN = "ghp_" + "Zq9X" * 9
POINTED = "The question, or the thread or log it was asked with, points at code."
OLD_RETRY = (
    "import time\n\nMAX_ATTEMPTS = 3\n\n\ndef retry(call, attempts=MAX_ATTEMPTS):\n"
    "    for attempt in range(attempts):\n        try:\n            return call()\n"
    "        except ConnectionError:\n            time.sleep(1)\n    raise RuntimeError('gave up after 3')\n"
)


def python_trace(note: str = "") -> str:
    """A production trace with a token planted in it, its frame on payments/retry.py line 9."""
    return (
        f"{note}Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.11/site-packages/celery/app/trace.py", line 451, in trace_task\n'
        '  File "/srv/app/payments/retry.py", line 9, in retry\n'
        f"    return call()  # called with Authorization: token {TOKEN}\n"
        "ConnectionError: [Errno 111] Connection refused"
    )


def first_request(model_requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = model_requests[0]["messages"]
    return messages


def mention_in_thread(rig: SlackRig, root: str, question: str, answer: str) -> str:
    rig.model.enqueue(text(answer))
    ts = rig.mention(question, channel="C1", thread_ts=root)
    rig.settle()
    rig.work()
    return ts


@pytest.mark.rig("slack")
def test_on_slack_a_trace_in_the_thread_root_reaches_the_model_with_its_frames_lines_and_is_cited(
    rig: SlackRig,
) -> None:
    root = rig.api.seed_thread("C1", [{"user": "U7", "text": f"prod is failing:\n```{python_trace()}```"}])
    ts = mention_in_thread(
        rig, root, "why does this fail?", "It retries, then gives up [payments:payments/retry.py#L5-L12]."
    )
    _system, pointed, asked = first_request(rig.model.requests)
    assert pointed["content"].startswith(POINTED)
    assert "is line 9 of [payments:payments/retry.py#L3-L13]" in pointed["content"]
    assert (
        " 9│         try:" in pointed["content"]
        and "13│     raise RuntimeError('gave up')" in pointed["content"]
    )
    assert 'File "/srv/app/payments/retry.py", line 9' in asked["content"]  # the trace itself, redacted
    assert "[REDACTED" in asked["content"] and "Zq9X" not in str(rig.model.requests)
    (reply,) = rig.api.thread_texts("C1", root)
    assert f"<{WEB}/blob/{rig.sha}/payments/retry.py#L5-L12|payments:payments/retry.py#L5-L12>" in reply
    assert rig.api.reactions("C1", ts) == ["white_check_mark"]


@pytest.mark.rig("slack")
def test_on_slack_the_questions_own_link_is_read_before_the_threads_links(rig: SlackRig) -> None:
    links = "\n".join(f"{WEB}/blob/main/payments/retry.py#L{n}" for n in range(1, 7))
    root = rig.api.seed_thread("C1", [{"user": "U7", "text": f"we looked at all of these:\n{links}"}])
    question = f"but what does {WEB}/blob/main/payments/retry.py#L13 raise?"
    mention_in_thread(rig, root, question, "It raises RuntimeError [payments:payments/retry.py#L13].")
    pointed = first_request(rig.model.requests)[1]["content"]
    read = [line for line in pointed.split("\n") if line.startswith("--- A link to [")]
    assert len(read) == 6  # the links read from one question and its thread, at most
    assert read[0].startswith("--- A link to [payments:payments/retry.py#L13-L13]")
    assert "[payments:payments/retry.py#L1-L1]" in read[1]
    assert "[payments:payments/retry.py#L6-L6]" not in pointed  # the thread's last link: over the limit


@pytest.fixture
def slack_with_history(tmp_path: Path) -> Iterator[tuple[SlackRig, str]]:
    """The Slack rig whose payments mirror also holds an older commit, with an older retry.py."""
    older = make_repo(tmp_path / "payments-src", {"payments/retry.py": OLD_RETRY})
    builder = build_slack_rig(tmp_path, DEFAULT_FILES)
    yield next(builder), older
    builder.close()


def test_on_slack_a_trace_naming_an_older_commit_is_read_at_that_commit_and_the_answer_links_it(
    slack_with_history: tuple[SlackRig, str],
) -> None:
    rig, older = slack_with_history
    trace = python_trace(note=f"release 1.4 (commit {older}) on prod:\n")
    root = rig.api.seed_thread("C1", [{"user": "U7", "text": f"```{trace}```"}])
    answer = f"Build {older[:10]} tries only 3 times [payments@{older[:10]}:payments/retry.py#L3-L9]."
    ts = mention_in_thread(rig, root, "why does this fail?", answer)
    pointed = first_request(rig.model.requests)[1]["content"]
    reference = f"payments@{older[:10]}:payments/retry.py#L3-L12"  # 12 lines at that commit
    assert f"is line 9 of [{reference}], read at commit {older[:10]}, the commit the text names" in pointed
    assert " 3│ MAX_ATTEMPTS = 3" in pointed and "MAX_ATTEMPTS = 5" not in pointed
    (reply,) = rig.api.thread_texts("C1", root)
    assert (
        f"<{WEB}/blob/{older}/payments/retry.py#L3-L9|payments@{older[:7]}:payments/retry.py#L3-L9>" in reply
    )
    assert f"payments:payments/retry.py:3-9 @ {older[:7]}" in reply  # the Sources name the commit read
    assert rig.api.reactions("C1", ts) == ["white_check_mark"]


def test_on_discord_a_trace_a_thread_was_started_from_reaches_the_model_with_its_frames_lines_and_is_cited(
    drig: DiscordRig,
) -> None:
    fake, rig = drig.fake, drig.rig
    root = drig.thread_from(f"prod is failing:\n```{python_trace()}```")
    asked = drig.mention("why does this fail?", channel=root["id"])
    rig.model.enqueue(text("It retries, then gives up [payments:payments/retry.py#L5-L12]."))
    drig.queued()
    drig.work()
    _system, pointed, question = first_request(rig.model.requests)
    assert pointed["content"].startswith(POINTED)
    assert "is line 9 of [payments:payments/retry.py#L3-L13]" in pointed["content"]
    assert "12│             time.sleep(backoff * 2**attempt)" in pointed["content"]
    assert "ConnectionError: [Errno 111]" in question["content"] and "Zq9X" not in str(rig.model.requests)
    (answer,) = fake.posted(root["id"])
    assert f"{WEB}/blob/{rig.sha}/payments/retry.py#L5-L12" in str(answer)
    assert ("PUT", "✅") in drig.reactions(asked["id"])


LINEAGE_SECRET = "launch_code = 'zz91-orange-otter'\n"


@pytest.fixture
def secret_in_history(tmp_path: Path) -> Iterator[tuple[Rig, str]]:
    """payments whose older commit holds payments/config.py as the very blob of its `.env` (secret
    by lineage, in every commit); a later commit deletes it, the newest adds unrelated lines there."""
    source = tmp_path / "payments-src"
    older = make_repo(source, {".env": LINEAGE_SECRET, "payments/config.py": LINEAGE_SECRET})
    git(source, "rm", "-q", "payments/config.py")
    git(source, "commit", "-q", "-m", "no config")
    builder = build_rig(tmp_path, {**DEFAULT_FILES, "payments/config.py": "REGION = 'eu-west-1'\n" * 12})
    yield next(builder), older
    builder.close()


def test_a_file_secret_by_lineage_at_the_commit_a_trace_or_link_names_stays_withheld(
    secret_in_history: tuple[Rig, str],
) -> None:
    rig, older = secret_in_history
    rig.model.enqueue(text("The region is set here [payments:payments/config.py#L1]."))
    question = (
        f"built from {older}, this fails:\n"
        '  File "/srv/app/payments/config.py", line 1, in <module>\n'
        f"and what was {WEB}/blob/{older}/payments/config.py#L1 then?"
    )
    _, events = rig.ask(question)
    sent = str(rig.model.requests)
    assert "zz91-orange-otter" not in sent and "launch_code" not in sent
    pointed = first_request(rig.model.requests)[1]["content"]
    assert f"read at payments's commit {rig.sha[:10]}:\npayments:payments/config.py lines 1-5" in pointed
    assert (
        "but payments/config.py could not be read at it, so the frames were read at the snapshot's" in pointed
    )
    assert (
        f"payments@{older[:10]}" not in pointed
    )  # nothing was read at that commit, so nothing to cite there
    kind, answer = rig.final(events)
    assert kind == "answer" and answer["unverified"] == 0


def test_in_the_console_a_trace_in_a_context_file_reaches_the_model_with_its_frames_lines(
    tmp_path: Path,
) -> None:
    make_repo(tmp_path / "payments-src", DEFAULT_FILES)
    repos = tmp_path / "repos.toml"
    repos.write_text(f'[[repo]]\nname = "payments"\nurl = "{tmp_path / "payments-src"}"\n')
    crash = tmp_path / "crash.log"
    crash.write_text(python_trace(note="INFO worker started\n"), encoding="utf-8")
    env = {
        "CODEBOT_DATA_DIR": str(tmp_path / "data"),
        "CODEBOT_REPOS_FILE": str(repos),
        "OPENAI_API_KEY": "k",
    }
    try:
        with ScriptedModel() as model:
            model.enqueue(text("It gives up after the last attempt [payments:payments/retry.py#L13]."))
            result = run_codebot(
                "ask", "--context", str(crash), "why?", env={**env, "OPENAI_BASE_URL": model.base_url}
            )
            pointed = str(model.requests[0]["messages"][1]["content"])
            sent = str(model.requests)
    finally:
        stop_embedded_server(load_settings(env_file=None, data_dir=tmp_path / "data"))
    assert result.returncode == 0, result.stderr
    assert pointed.startswith(POINTED) and "is line 9 of [payments:payments/retry.py#L3-L13]" in pointed
    assert "Zq9X" not in sent and "Zq9X" not in result.stdout
    assert "payments:payments/retry.py:13 @" in result.stdout  # the citation, verified


@pytest.fixture
def rig_with_history(tmp_path: Path) -> Iterator[tuple[Rig, str]]:
    """The end-to-end rig whose payments mirror also holds an older commit, tagged v1.4.0, with
    an older retry.py."""
    older = make_repo(
        tmp_path / "payments-src", {"payments/retry.py": OLD_RETRY}, links={"payments/env.py": "../.env"}
    )
    git(tmp_path / "payments-src", "tag", "v1.4.0", older)
    builder = build_rig(tmp_path, DEFAULT_FILES)
    yield next(builder), older
    builder.close()


def test_a_link_to_lines_at_an_older_commit_is_read_and_cited_at_that_commit(
    rig_with_history: tuple[Rig, str],
) -> None:
    rig, older = rig_with_history
    rig.model.enqueue(text(f"Three attempts then [payments@{older[:10]}:payments/retry.py#L3]."))
    _, events = rig.ask(f"what did {WEB}/blob/{older}/payments/retry.py#L3-L4 say then?")
    pointed = first_request(rig.model.requests)[1]["content"]
    reference = f"payments@{older[:10]}:payments/retry.py#L3-L4"
    assert f"--- A link to [{reference}], read at commit {older[:10]}, the link's" in pointed
    assert "3│ MAX_ATTEMPTS = 3" in pointed and "5│" not in pointed
    kind, answer = rig.final(events)
    assert kind == "answer" and answer["unverified"] == 0
    assert f"{WEB}/blob/{older}/payments/retry.py#L3" in answer["markdown"]


def test_a_trace_naming_a_released_version_is_read_at_that_tags_commit(
    rig_with_history: tuple[Rig, str],
) -> None:
    rig, older = rig_with_history
    rig.model.enqueue(text(f"v1.4.0 gives up after 3 [payments@{older[:10]}:payments/retry.py#L12]."))
    _, events = rig.ask(python_trace(note="payments release v1.4.0 crashed:\n"))
    pointed = first_request(rig.model.requests)[1]["content"]
    assert f"[payments@{older[:10]}:payments/retry.py#L3-L12], read at commit {older[:10]}" in pointed
    assert "12│     raise RuntimeError('gave up after 3')" in pointed
    kind, answer = rig.final(events)
    assert kind == "answer" and answer["unverified"] == 0
    assert f"{WEB}/blob/{older}/payments/retry.py#L12" in answer["markdown"]


def test_a_version_is_recognised_when_named_as_one_and_a_runtimes_or_librarys_is_not() -> None:
    log = "payments release 1.4.2 on python3.11 (requests 2.31.0), image v2.0, urllib3/v1.26.18x"
    assert find_versions(log) == ["v1.4.2", "1.4.2", "v2.0"]


def test_reading_at_a_commit_refuses_what_the_history_tools_refuse_and_records_nothing(
    rig_with_history: tuple[Rig, str],
) -> None:
    rig, older = rig_with_history
    at_commit = ToolRegistry([read_file_at])
    refused = {
        ("../etc/passwd", older): "'..' is not allowed",
        (".env", older): "secret file pattern",
        (".git/config", older): "the .git folder is not readable",
        ("payments/env.py", older): "is not a regular file at commit",  # a symlink, never followed
        ("payments/nothing.py", older): "does not exist at commit",
        ("payments/retry.py", "--output=/tmp/x"): "is not something codebot can look up",
        ("payments/retry.py", f"{older}:payments/retry.py"): "is not something codebot can look up",
        ("payments/retry.py", "0badc0de" * 5): "is not in the history of payments",
    }
    with rig.runtime.mirrors.lease(["payments"]) as snapshots:
        ctx = make_context(rig.settings, snapshots, keep_data=False)
        for (path, commit), why in refused.items():
            outcome = at_commit.call(
                ctx, "read_file_at", {"repo": "payments", "path": path, "commit": commit}
            )
            assert not outcome.ok and why in outcome.text, (path, commit, outcome.text)
        assert not ctx.history.lines and not ctx.shown.files()
        read = at_commit.call(
            ctx, "read_file_at", {"repo": "payments", "path": "payments/retry.py", "commit": "v1.4.0"}
        )
    assert read.ok and read.text.startswith(
        f"payments:payments/retry.py lines 1-12 of 12, at commit {older[:10]}"
    )
    assert ctx.history.covers("payments", older, "payments/retry.py", 1, 12)
