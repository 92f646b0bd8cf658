"""A question's first model request does not wait for the platform to mark it taken up
(worker/jobs/lane.py): the 👀, the progress message and the live view are made on the question's
lane while the model is already asked; what the asker sees keeps its order all the same (👀 and
the progress message first, the answer last, ✅ after 👀). Each test holds one platform call
(the fakes' `hang`/`hold`, the console's one Redis write) until the model has been asked."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from bot import texts
from tests.support.discord_rig import DiscordRig
from tests.support.e2e import Rig
from tests.support.fixture_repos import make_repo
from tests.support.model_server import ScriptedModel, text, tool_calls
from tests.support.slack_rig import SlackRig, wait_until
from worker.agent.loop import Agent
from worker.jobs import lane
from worker.jobs.job import QuestionRun
from worker.jobs.question import Question
from worker.jobs.sink import ConsoleSink
from worker.jobs.threaded_worker import StopJobRequested
from worker.repos.refresh import REPO_KEY_PREFIX

ANSWER = "Retries back off exponentially [payments:payments/retry.py#L6-L12]."
STEP = "reading `payments/retry.py` from L1 in payments"  # drig.script_answer's tool call
# the longest a held call is held (the old, waiting code ends up asking then); a hang guard:
# released by an event at once on the code as it is, it must outlast a busy machine's slowest start
HOLD_SECONDS = 40.0


def release_once_asked(
    model: ScriptedModel, released: threading.Event, still_held: Callable[[], bool], requests: int = 1
) -> list[bool]:
    """Set `released` once the model got `requests` requests; the list it returns says (once the
    thread is done) whether the platform's call was still held when they came."""
    held_when_asked: list[bool] = []

    def release() -> None:
        try:
            model.wait_for_requests(requests, timeout=HOLD_SECONDS * 2)
        finally:
            held_when_asked.append(still_held())
            released.set()

    threading.Thread(target=release, daemon=True).start()
    return held_when_asked


def hold_console_received(
    monkeypatch: pytest.MonkeyPatch, until: threading.Event, seconds: float = HOLD_SECONDS
) -> list[str]:
    """The console's `received` event (its one Redis write) is held until `until` is set (at
    most `seconds`); the list it returns gets "received" once the write is let through."""
    original, done = ConsoleSink.received, []

    def held(sink: ConsoleSink) -> None:
        until.wait(seconds)
        original(sink)
        done.append("received")

    monkeypatch.setattr(ConsoleSink, "received", held)
    return done


def script(model: ScriptedModel) -> None:
    model.enqueue(
        tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py", "start_line": 1})),
        text(ANSWER),
    )


def test_the_first_model_request_does_not_wait_for_discord_to_mark_the_question_taken_up(
    drig: DiscordRig,
) -> None:
    fake = drig.fake
    drig.script_answer(ANSWER)
    asked = drig.mention("how does retry work?")
    drig.acked(asked)  # the adapter's 👀; Discord now holds the worker's
    released = threading.Event()
    fake.hold("PUT", rf"/messages/{asked['id']}/reactions/", released, HOLD_SECONDS)
    held_when_asked = release_once_asked(drig.rig.model, released, lambda: not fake.released)
    drig.work()
    assert held_when_asked == [True]
    assert drig.reactions(asked["id"]) == [("PUT", "👀"), ("PUT", "👀"), ("PUT", "✅"), ("DELETE", "👀")]
    [message] = fake.posted(asked["id"])  # the progress message, then the answer in it
    states = fake.states(message["id"])
    assert states[0] == texts.QUEUED and states[-1].startswith("Retries back off exponentially")


def test_a_question_whose_live_view_cannot_be_made_shows_as_progress_lines_what_the_model_did_meanwhile(
    drig: DiscordRig,
) -> None:
    fake = drig.fake
    drig.script_answer(ANSWER)
    asked = drig.mention("how does retry work?")
    drig.acked(asked)
    released = threading.Event()
    fake.hold("PUT", rf"/messages/{asked['id']}/reactions/", released, HOLD_SECONDS)
    fake.refuse(2, "POST", rf"^/channels/{asked['id']}/messages$")  # received's message, the live view's
    # released only once the tool call ran and the model was asked again: both were reported meanwhile
    held_when_asked = release_once_asked(drig.rig.model, released, lambda: not fake.released, requests=2)
    drig.work()
    assert held_when_asked == [True]
    [message] = fake.posted(asked["id"])
    states = fake.states(message["id"])
    assert states[0] == texts.PROGRESS.format(step=STEP)  # a progress line, not a live edit
    assert states[-1].startswith("Retries back off exponentially")
    assert drig.reactions(asked["id"])[-2:] == [("PUT", "✅"), ("DELETE", "👀")]


@pytest.mark.rig("slack")
def test_the_first_model_request_does_not_wait_for_slack_to_post_the_placeholder(rig: SlackRig) -> None:
    script(rig.model)
    ts = rig.mention("how does retry work?")
    rig.settle()
    released = threading.Event()
    rig.api.hang("chat.postMessage", HOLD_SECONDS, "Got it", until=released)  # the worker's placeholder
    held_when_asked = release_once_asked(rig.model, released, lambda: not rig.api.released)
    rig.work()
    assert held_when_asked == [True]
    (message,) = rig.api.thread_messages("C1", ts)  # the placeholder, then the progress, then the answer
    assert message.states[0].startswith("Got it") and "reading" in message.states[1]
    assert message.text.startswith("Retries back off exponentially")
    assert rig.api.reactions("C1", ts) == ["white_check_mark"]  # 👀 went on, then came off for ✅


@pytest.mark.rig("slack")
def test_a_question_answered_before_the_adapters_eyes_land_keeps_only_the_check_mark(rig: SlackRig) -> None:
    """About 1 question in 1,000 kept 👀 next to ✅: the adapter adds 👀 after enqueueing, and a
    fast worker answered (👀 off, ✅ on) before Slack acted on the adapter's 👀. Here Slack
    holds the adapter's 👀 until the worker has finished."""
    script(rig.model)
    # the adapter's client waits as long as Slack holds its call (its default is 30 s, less than
    # the worker may take on a busy machine: a call given up on is another case, not this one)
    rig.server.events.app.client.timeout = int(HOLD_SECONDS * 2)
    released = threading.Event()
    rig.api.hang("reactions.add", HOLD_SECONDS, "eyes", until=released)  # the adapter's, the first
    ts = rig.mention("how does retry work?")
    wait_until(lambda: rig.api.held)  # enqueued; the adapter's 👀 is on its way
    try:
        rig.work()  # the worker's 👀 on, the answer, 👀 off and ✅ on
    finally:
        released.set()
    rig.settle()
    assert rig.api.thread_texts("C1", ts)[-1].startswith("Retries back off exponentially")
    assert [call.body["name"] for call in rig.api.released] == ["eyes"]  # the adapter's, after all
    assert rig.api.reactions("C1", ts) == ["white_check_mark"]


def reactions_now(done: list[tuple[str, str]]) -> list[str]:
    """The reactions on a Discord message after these PUTs and DELETEs, in the order Discord did them."""
    now: list[str] = []
    for method, emoji in done:
        if method == "PUT" and emoji not in now:
            now.append(emoji)
        elif method == "DELETE" and emoji in now:
            now.remove(emoji)
    return now


def test_a_discord_ask_answered_before_the_adapters_eyes_land_keeps_only_the_check_mark(
    drig: DiscordRig,
) -> None:
    """As on Slack: `/codebot ask`'s 👀 on the command's message held by Discord until the
    worker has answered (👀 off, ✅ on); the adapter then takes its late 👀 off again."""
    fake = drig.fake
    drig.script_answer(ANSWER)
    released = threading.Event()
    fake.hold("PUT", "/reactions/👀/", released, HOLD_SECONDS)  # the adapter's, the first
    asked = fake.interaction("ask", {"question": "how does retry work?"})
    fake.wait_for(lambda: fake.held)  # enqueued; the adapter's 👀 is on its way
    try:
        drig.work()
    finally:
        released.set()
    shown = fake.interaction_messages[asked["token"]]
    fake.wait_for(lambda: len(drig.reactions(shown)) == 5)  # the worker's three, then the adapter's
    assert drig.reactions(shown)[-2:] == [("PUT", "👀"), ("DELETE", "👀")]
    assert reactions_now(drig.reactions(shown)) == ["✅"]
    [answer] = fake.posted(shown)
    assert answer["content"].startswith("Retries back off exponentially")


def test_the_first_model_request_does_not_wait_for_the_console_to_show_the_question_taken_up(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    script(rig.model)
    released = threading.Event()
    received = hold_console_received(monkeypatch, until=released)
    held_when_asked = release_once_asked(rig.model, released, lambda: not received)
    _question, events = rig.ask("how does retry work?")
    assert held_when_asked == [True]
    shown = [(kind, fields.get("text")) for kind, fields in events]
    assert shown == [("received", None), ("progress", STEP), ("answer", None)]


def test_a_refresh_shown_before_the_agent_still_comes_after_the_question_is_marked_taken_up(
    rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    newer = make_repo(tmp_path / "payments-src", {"CHANGELOG.md": "v2\n"})
    rig.redis.hset(REPO_KEY_PREFIX + "payments", "sha", newer)  # another machine fetched it
    script(rig.model)
    hold_console_received(monkeypatch, until=threading.Event(), seconds=1.0)  # a slow write
    _question, events = rig.ask("how does retry work?")
    shown = [(kind, fields.get("text")) for kind, fields in events]
    assert shown == [
        ("received", None),
        ("progress", f"updating payments to commit `{newer[:7]}`"),  # catch-up, before the agent
        ("progress", STEP),
        ("answer", None),
    ]


def test_a_platform_that_never_marks_the_question_taken_up_does_not_keep_the_answer_back(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(lane, "LANE_WAIT_SECONDS", 0.5)
    script(rig.model)
    never = threading.Event()
    hold_console_received(monkeypatch, until=never)  # held HOLD_SECONDS, far past the lane's wait
    try:
        _question, events = rig.ask("how does retry work?")
    finally:
        never.set()  # the held write goes through now (after the answer)
    assert [kind for kind, _fields in events] == ["answer"]  # no progress line while the lane is late
    assert "has not marked the question taken up yet; going on without it" in caplog.text


def test_a_question_stopped_mid_answer_leaves_no_lane_thread_behind(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    def stopped(_agent: Agent, _question: Question, **_texts: object) -> None:
        raise StopJobRequested  # `rq` stop-job, raised in the question's thread while the model works

    monkeypatch.setattr(Agent, "run", stopped)
    question = rig.question("how does retry work?")
    with pytest.raises(StopJobRequested):
        QuestionRun(rig.runtime, rig.redis, question).run()
    assert [kind for kind, _fields in rig.events(question, timeout=1.0)] == ["received"]
    wait_until(lambda: not [t for t in threading.enumerate() if t.name.startswith("codebot-lane-")])
