"""Files in the thread are context: a text file attached to a message of a Slack thread, or to
the mention itself, is downloaded by the real worker from the fake Slack's file host (with the
bot token, which no other host ever gets) and reaches the model, redacted; a file not read is
named in the answer's first lines."""

from __future__ import annotations

import logging

import pytest

from tests.support.answers import body
from tests.support.file_host import ForeignHost
from tests.support.model_server import text, tool_calls
from tests.support.slack_rig import SlackRig

pytestmark = pytest.mark.rig("slack")
READ_RETRY = ("read_file", {"repo": "payments", "path": "payments/retry.py", "start_line": 1, "end_line": 13})
TOKEN = "ghp_" + "c3D4" * 9
LOG = (
    "2026-12-07 10:00:01 INFO checkout started\n"
    f"2026-12-07 10:00:02 DEBUG using token {TOKEN}\n"
    'Traceback (most recent call last):\n  File "payments/retry.py", line 9, in retry\n'
    "PaymentDeclined: card_expired\n"
).encode()
ANSWER = "It is the retry's last attempt."


def ask_in(
    rig: SlackRig, root: str | None, question: str, files: list[dict[str, object]] | None = None
) -> str:
    rig.model.enqueue(tool_calls(READ_RETRY), text(ANSWER))
    ts = rig.mention(question, thread_ts=root, files=files)
    rig.settle()
    rig.work()
    return ts


def first_request(rig: SlackRig) -> str:
    return str(rig.model.requests[0]["messages"][-1]["content"])


def test_a_log_attached_in_the_thread_reaches_the_model_redacted_and_no_log_or_record_holds_its_token(
    rig: SlackRig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    rig.api.users.update({"U7": "Dana Ops"})
    log = rig.api.file("checkout.log", LOG)
    root = rig.api.seed_thread("C1", [{"user": "U7", "text": "checkout broke, log attached", "files": [log]}])
    ask_in(rig, root, "why does this fail?")
    first = first_request(rig)
    assert '--- Dana Ops, attached file "checkout.log":' in first and "PaymentDeclined: card_expired" in first
    assert first.index("log attached") < first.index("card_expired") < first.index("why does this fail?")
    assert "c3D4c3D4" not in str(rig.model.requests) and "c3D4c3D4" not in caplog.text
    stored = [rig.redis.dump(key) or b"" for key in rig.redis.keys("*")]
    assert stored and not any(b"c3D4c3D4" in value for value in stored)
    assert list(map(body, rig.api.thread_texts("C1", root))) == [ANSWER]


def test_the_bot_token_goes_to_slacks_file_host_and_never_to_a_foreign_one(rig: SlackRig) -> None:
    foreign = ForeignHost()
    try:
        ours = rig.api.file("ours.log", b"served by slack\n")
        theirs = {
            **rig.api.file("theirs.log", b"x"),
            "url_private_download": foreign.put("/t.log", b"stolen\n"),
        }
        root = rig.api.seed_thread("C1", [{"user": "U7", "text": "two logs", "files": [ours, theirs]}])
        ask_in(rig, root, "what do the logs say?")
        assert foreign.store.requests == []  # no request at all, so no token either
    finally:
        foreign.close()
    assert [r.authorization for r in rig.api.files.requests] == ["Bearer xoxb-test"]
    assert "served by slack" in first_request(rig) and "stolen" not in first_request(rig)
    (reply,) = rig.api.thread_texts("C1", root)
    assert reply.startswith("_I did not read `theirs.log`: it is not on the chat platform's own file host._")
    assert body(reply).endswith(ANSWER)


def test_a_redirect_from_slacks_file_host_is_not_followed_so_the_token_goes_nowhere_else(
    rig: SlackRig,
) -> None:
    foreign = ForeignHost()
    try:
        moved = rig.api.file("moved.log", b"here\n")
        rig.api.files.redirect(moved["url_private_download"], foreign.put("/login", b"sign in\n"))
        root = rig.api.seed_thread("C1", [{"user": "U7", "text": "a log", "files": [moved]}])
        ask_in(rig, root, "what does it say?")
        assert foreign.store.requests == []
    finally:
        foreign.close()
    (reply,) = rig.api.thread_texts("C1", root)
    assert reply.startswith("_I could not read `moved.log`: the platform did not give it")
    assert "sign in" not in first_request(rig)


def test_a_binary_attachment_is_named_as_unread_and_the_question_answered(rig: SlackRig) -> None:
    dump = rig.api.file("core.dump", b"\x7fELF\x02\x01\x01\x00\x00\x00" * 100, "application/octet-stream")
    root = rig.api.seed_thread("C1", [{"user": "U7", "text": "it crashed", "files": [dump]}])
    ask_in(rig, root, "why did it crash?")
    assert '"core.dump":\n[this attached file was not read: it is not a text file]' in first_request(rig)
    (reply,) = rig.api.thread_texts("C1", root)
    assert body(reply) == f"_I did not read `core.dump`: it is not a text file._\n\n{ANSWER}"


@pytest.mark.rig("slack", thread_context_file_seconds=1.0)
def test_downloads_failing_by_404_403_and_timeout_each_get_a_line_and_the_question_its_answer(
    rig: SlackRig, caplog: pytest.LogCaptureFixture
) -> None:
    gone, refused, slow = (rig.api.file(name, b"text\n") for name in ("gone.log", "refused.log", "slow.log"))
    rig.api.files.fail(gone["url_private_download"], 404)
    rig.api.files.fail(refused["url_private_download"], 403)
    rig.api.files.hang(slow["url_private_download"])
    root = rig.api.seed_thread("C1", [{"user": "U7", "text": "three logs", "files": [gone, refused, slow]}])
    ask_in(rig, root, "what do they say?")
    (reply,) = rig.api.thread_texts("C1", root)
    assert reply.splitlines()[:3] == [
        "_I could not read `gone.log`: the platform no longer has it (404)._",
        "_I could not read `refused.log`: the platform refused to give it (403)._",
        "_I could not read `slow.log`: its download timed out._",
    ]
    assert body(reply).endswith(ANSWER) and "Traceback" not in caplog.text


def test_a_file_attached_to_the_top_level_mention_itself_reaches_the_model(rig: SlackRig) -> None:
    ts = ask_in(rig, None, "why does this fail?", files=[rig.api.file("ci.log", LOG)])
    first = first_request(rig)
    assert 'attached file "ci.log":' in first and "PaymentDeclined: card_expired" in first
    assert first.index("card_expired") < first.index("why does this fail?")
    assert [call.body["ts"] for call in rig.api.calls_to("conversations.replies")] == [ts]
    assert list(map(body, rig.api.thread_texts("C1", ts))) == [ANSWER]


@pytest.mark.rig("slack", thread_context_file_bytes=4096)
def test_a_log_over_the_byte_cap_is_read_from_its_end_and_the_asker_told(rig: SlackRig) -> None:
    lines = [f"line {n:05d} all good" for n in range(2000)] + ["FATAL: ledger locked"]
    big = rig.api.file("big.log", "\n".join(lines).encode())
    root = rig.api.seed_thread("C1", [{"user": "U7", "text": "huge log", "files": [big]}])
    ask_in(rig, root, "what went wrong?")
    first = first_request(rig)
    assert "FATAL: ledger locked" in first and "line 00000" not in first
    assert "longer than 4,096 bytes: only its end was read" in first
    (reply,) = rig.api.thread_texts("C1", root)
    assert reply.startswith("_I read only the end of `big.log`: it is longer than I can read at once._")


def test_deleted_hidden_and_external_files_are_named_without_a_download(rig: SlackRig) -> None:
    deleted = {**rig.api.file("old.log", b"x"), "mode": "tombstone"}
    hidden = {**rig.api.file("older.log", b"x"), "mode": "hidden_by_limit"}
    external = {**rig.api.file("doc.txt", b"x"), "mode": "external", "is_external": True}
    root = rig.api.seed_thread("C1", [{"user": "U7", "text": "files", "files": [deleted, hidden, external]}])
    ask_in(rig, root, "what is in them?")
    assert rig.api.files.requests == []
    (reply,) = rig.api.thread_texts("C1", root)
    assert reply.splitlines()[:3] == [
        "_I could not read `old.log`: it was deleted._",
        "_I could not read `older.log`: the workspace's plan hides it._",
        "_I did not read `doc.txt`: it is stored outside the chat platform._",
    ]
    assert body(reply).endswith(ANSWER)


def test_a_log_attached_to_the_root_of_a_long_thread_stays_with_the_root(rig: SlackRig) -> None:
    """The budget keeps the root and the newest messages: the root's log went with the oldest."""
    big = b"2026-12-07 09:59:59 INFO request served\n" * 5_000 + LOG  # ~200 KB, its end the trace
    log = rig.api.file("checkout.log", big)
    replies = [{"user": f"U{n % 5}", "text": f"seen again on node {n}"} for n in range(120)]
    root = rig.api.seed_thread("C1", [{"user": "U7", "text": "checkout broke", "files": [log]}, *replies])
    ask_in(rig, root, "why does this fail?")
    first = first_request(rig)
    assert 'attached file "checkout.log"' in first and "PaymentDeclined: card_expired" in first
    assert "seen again on node 119" in first  # the newest still there beside it
    downloads = [r for r in rig.api.files.requests if "checkout.log" in r.path]
    ranges = [{k.lower(): v for k, v in r.headers.items()}.get("range") for r in downloads]
    assert ranges == ["bytes=-48000"]  # its end, no more than 12,000 characters could ever hold
