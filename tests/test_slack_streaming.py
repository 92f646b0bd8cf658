"""Slack answers stream into the thread (bot/slack/stream.py): text grows as the model writes
it, each tool call is a task card, a loading state shows while the model thinks, and the stream
ends with the verified Sources and the feedback buttons. The fake Slack Web API speaks the
streaming methods as Slack documents them (tests/support/slack_surfaces.py)."""

from __future__ import annotations

import itertools
import json
import re
import threading
from typing import Any

import pytest

from tests.support.model_server import Reply, held_before_answering, paced, text, tool_calls
from tests.support.slack_rig import SlackRig, wait_until

pytestmark = pytest.mark.rig("slack", slack_streaming=True, slack_stream_interval_seconds=0.05)

ANSWER = (
    "The payments service retries a failed call up to five times [payments:payments/retry.py#L3]. "
    "After each ConnectionError it sleeps twice as long as before, starting at half a second "
    "[payments:payments/retry.py#L6-L12]. When every attempt failed it gives up with a RuntimeError."
)


def script(rig: SlackRig, answer: str = ANSWER, pace: float = 0.03) -> None:
    rig.model.enqueue(
        tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"})),
        paced(pace, text(answer)),
    )


def text_states(rig: SlackRig, ts: str) -> list[str]:
    (message,) = rig.api.thread_messages("C1", ts)
    return list(dict.fromkeys(state.split("\n[")[0] for state in message.states if state.strip()))


def test_an_answer_is_seen_growing_in_one_streamed_message_that_ends_with_sources_and_feedback(
    rig: SlackRig,
) -> None:
    script(rig)
    ts = rig.mention("how does retry work?")
    rig.settle()
    rig.work()
    (message,) = rig.api.thread_messages("C1", ts)  # no placeholder: one message, streamed
    growing = text_states(rig, ts)
    assert len(growing) >= 3, growing  # several distinct states, each extending the one before
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(growing))
    link = f"https://github.com/acme/payments/blob/{rig.sha}/payments/retry.py#L3"
    assert f"({link})" in message.text and "**Sources**" in message.text
    assert not message.streaming and rig.api.reactions("C1", ts) == ["white_check_mark"]
    (feedback,) = [b for b in message.blocks if b["type"] == "context_actions"]
    assert feedback["elements"][0]["type"] == "feedback_buttons"
    (start,) = rig.api.calls_to("chat.startStream")
    assert (start.body["recipient_user_id"], start.body["recipient_team_id"]) == ("U1", "T0001")
    assert start.body["thread_ts"] == ts and len(rig.api.calls_to("chat.stopStream")) == 1


def test_each_tool_call_is_a_task_card_that_ends_complete(rig: SlackRig) -> None:
    script(rig)
    ts = rig.mention("how does retry work?")
    rig.settle()
    rig.work()
    (message,) = rig.api.thread_messages("C1", ts)
    assert list(message.tasks.values()) == [("reading `payments/retry.py` from L1 in payments", "complete")]
    sent = [
        chunk["status"]
        for call in list(rig.api.calls)
        if call.method in ("chat.startStream", "chat.appendStream", "chat.stopStream")
        for chunk in call.body.get("chunks") or []
        if chunk["type"] == "task_update"
    ]
    assert sent == ["in_progress", "complete"]  # shown running, then done


def test_a_loading_state_shows_while_the_model_thinks_and_is_cleared_at_the_end(rig: SlackRig) -> None:
    script(rig)
    ts = rig.mention("how does retry work?")
    rig.settle()
    rig.work()
    statuses = [
        status for channel, thread, status in rig.api.surfaces.statuses if (channel, thread) == ("C1", ts)
    ]
    assert statuses[0] == "is thinking…" and statuses[-1] == ""


def streamed_text(rig: SlackRig) -> str:
    """Every piece of text sent through the streaming methods, in order."""
    return "".join(
        chunk["text"]
        for call in list(rig.api.calls)
        if call.method in ("chat.startStream", "chat.appendStream", "chat.stopStream")
        for chunk in call.body.get("chunks") or []
        if chunk["type"] == "markdown_text"
    )


def ask(rig: SlackRig, answer: str, **kwargs: Any) -> str:
    script(rig, answer, **kwargs)
    ts = rig.mention("how does retry work?")
    rig.settle()
    rig.work()
    return ts


def test_a_secret_split_across_streamed_pieces_is_redacted_in_every_call(rig: SlackRig) -> None:
    ts = ask(rig, "The key is AKIAQWERTYUIOPASDFGHJ and the token ghp_" + "a1B2" * 9 + " end of it.")
    bodies = json.dumps([call.body for call in rig.api.calls])
    assert "AKIAQWERTYUIOPASDFGHJ" not in bodies and "a1B2a1B2" not in bodies
    assert "[REDACTED:" in streamed_text(rig) and "[REDACTED:" in rig.api.thread_texts("C1", ts)[0]


def test_nothing_streamed_can_ping_anyone(rig: SlackRig) -> None:
    ask(rig, "Ping @here and <!channel> and <@U0BOSS> and &lt;!everyone&gt; then @everyone. Done now.")
    sent = streamed_text(rig)
    for forbidden in ("@here", "<!channel>", "<@U0BOSS>", "&lt;!everyone", "@everyone"):
        assert forbidden not in sent, forbidden
    assert "Done now" in sent


@pytest.mark.parametrize(
    "lookalike",
    [
        "[payments：payments/retry.py#L3](https://evil.example/x)",  # fullwidth colon
        "[pay\u200bments:payments/retry.py#L3](https://evil.example/x)",  # zero-width space
        "[retry.py#L3](https://evil.example/x)",  # no repo: prefix
        "[payments:payments/retry.py\n#L3](https://evil.example/x)",  # a line break in the label
        "[[[retry.py#L3]]](https://evil.example/x)",  # brackets nested twice
        "[retry.py#L3](https://evil.example/x 'the loop')",  # a title in single quotes
        "[retry.py#L3](https://evil.example/((x)))",  # parentheses nested twice in the target
        "[retry.py#L3][1]\n\n[1]: https://evil.example/x\n",  # a reference-style link
    ],
)
def test_a_citation_lookalike_never_keeps_a_link_to_another_site(rig: SlackRig, lookalike: str) -> None:
    ts = ask(rig, f"See {lookalike} for the details of the retry loop. That is all of it.")
    assert "evil.example" not in streamed_text(rig).replace("(https://evil.example/x)", "")
    assert "](https://evil.example" not in streamed_text(rig)
    assert "evil.example" not in rig.api.thread_texts("C1", ts)[0]


def test_a_citation_is_never_shown_half_written_nor_unchecked(rig: SlackRig) -> None:
    ts = ask(rig, ANSWER + " Beyond the file [payments:payments/retry.py#L900] nothing is said.")
    (message,) = rig.api.thread_messages("C1", ts)
    for state in message.states:
        shown = state.split("\n[")[0]
        assert not re.search(r"\[payments:[^\]]*$", shown), shown  # no open citation at the end
        assert not re.search(r"\[payments:[^\]\s]*\](?!\()", shown), shown  # none unlinked, unmarked
    assert "`payments:payments/retry.py#L900` (unverified)" in message.text


def test_a_channel_that_refuses_streaming_gets_the_post_and_update_path_and_is_remembered(
    rig: SlackRig,
) -> None:
    rig.api.fail("chat.startStream", "channel_type_not_supported")
    first = ask(rig, ANSWER)
    (reply,) = rig.api.thread_texts("C1", first)  # the placeholder, replaced by the answer
    assert reply.startswith("The payments service retries") and "<https://github.com/acme/payments" in reply
    second = ask(rig, ANSWER)
    assert len(rig.api.calls_to("chat.startStream")) == 1  # remembered: not tried again here
    assert rig.api.thread_texts("C1", second)[0].startswith("The payments service retries")
    assert rig.api.reactions("C1", second) == ["white_check_mark"]


def test_a_workspace_that_does_not_know_the_streaming_methods_is_remembered_for_every_channel(
    rig: SlackRig,
) -> None:
    rig.api.fail("chat.startStream", "unknown_method")
    ask(rig, ANSWER)
    script(rig)
    ts = rig.mention("and in another channel?", channel="C2")
    rig.settle()
    rig.work()
    assert len(rig.api.calls_to("chat.startStream")) == 1
    assert rig.api.thread_texts("C2", ts)[0].startswith("The payments service retries")


def test_a_stream_refused_midway_ends_as_the_stored_answer_in_the_same_message(rig: SlackRig) -> None:
    rig.api.fail("chat.appendStream", "message_not_in_streaming_state", count=1000)
    ts = ask(rig, ANSWER)
    (message,) = rig.api.thread_messages("C1", ts)  # no second message: the stream was replaced
    assert message.text.startswith("The payments service retries") and "*Sources*" in message.text
    assert any(b["type"] == "context_actions" for b in message.blocks)
    assert rig.api.calls_to("chat.postMessage") == []


def test_a_preamble_before_a_tool_call_is_replaced_by_the_answer_alone(rig: SlackRig) -> None:
    rig.model.enqueue(
        tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}), content="Let me look. "),
        paced(0.02, text(ANSWER)),
    )
    ts = rig.mention("how does retry work?")
    rig.settle()
    rig.work()
    # The preamble is streamed if the sender wakes between the tool call and the next turn (on a
    # quiet machine it does; on a busy one it may not): either way the answer stands alone.
    (message,) = rig.api.thread_messages("C1", ts)
    assert "Let me look" not in message.text and message.text.startswith("The payments service")


@pytest.mark.parametrize("streaming", [True, False])
def test_a_tool_argument_shaped_as_a_link_never_shows_as_one_in_a_task_card_or_progress_line(
    rig: SlackRig, streaming: bool
) -> None:
    if not streaming:
        rig.api.fail("chat.startStream", "channel_type_not_supported")
    hostile = "x` [retry.py#L3](https://evil.example/x) `"
    rig.model.enqueue(tool_calls(("search", {"repo": "payments", "pattern": hostile})))

    def answer_once_the_card_or_line_is_out(body: dict[str, Any]) -> Reply:
        # on a busy machine the answer could otherwise overtake the sender thread: no card to check
        wait_until(lambda: "evil.example" in json.dumps([c.body for c in rig.api.calls]), timeout=60)
        return text(ANSWER)

    rig.model.set_handler(answer_once_the_card_or_line_is_out)
    rig.mention("how does retry work?")
    rig.settle()
    rig.work()
    shown = json.dumps([call.body for call in rig.api.calls], ensure_ascii=False)
    assert "`x' [retry.py#L3](https://evil.example/x) '`" in shown  # shown whole inside its code span
    assert "<https://evil.example" not in shown and "`x` [retry.py" not in shown  # never a link


def test_the_first_model_request_does_not_wait_for_slack_to_add_the_taken_up_reaction(rig: SlackRig) -> None:
    script(rig)
    ts = rig.mention("how does retry work?")
    rig.settle()  # the adapter's 👀 is on; Slack now holds the worker's
    released = threading.Event()
    rig.api.hang("reactions.add", 30, "eyes", until=released)
    held_when_asked: list[bool] = []

    def release_once_the_model_is_asked() -> None:
        rig.model.wait_for_requests(1)
        held_when_asked.append(not rig.api.released)  # the 👀 call not yet let through
        released.set()

    releaser = threading.Thread(target=release_once_the_model_is_asked, daemon=True)
    releaser.start()
    rig.work()  # RQ's worker runs in the main thread (its signal handlers)
    releaser.join(10)
    assert held_when_asked == [True]
    # the end's reactions waited for it: 👀 went on, then came off for ✅
    assert rig.api.reactions("C1", ts) == ["white_check_mark"]
    (message,) = rig.api.thread_messages("C1", ts)
    assert "**Sources**" in message.text


@pytest.mark.rig("slack", slack_streaming=True, slack_stream_interval_seconds=0.05, model_timeout_seconds=600)
def test_a_model_slow_to_answer_shows_the_waiting_line_as_the_loading_status(rig: SlackRig) -> None:
    released = threading.Event()
    rig.model.enqueue(
        held_before_answering(
            (released,), tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}))
        ),
        paced(0.03, text(ANSWER)),
    )
    ts = rig.mention("how does retry work?")
    rig.settle()

    def statuses() -> list[str]:
        return [
            status for channel, thread, status in rig.api.surfaces.statuses if (channel, thread) == ("C1", ts)
        ]

    def release_once_shown() -> None:  # the model answers only once the status said it waits for it
        wait_until(lambda: any(s.startswith("is waiting for the model (") for s in statuses()), timeout=120)
        released.set()

    threading.Thread(target=release_once_shown, daemon=True).start()
    rig.work()
    shown = statuses()
    waiting = next(i for i, s in enumerate(shown) if re.fullmatch(r"is waiting for the model \(\d+ s\)…", s))
    assert shown.index("is thinking…") < waiting < len(shown) - 1 and shown[-1] == "", shown
