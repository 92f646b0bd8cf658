"""Odd input never vanishes: every Slack mention that passes the signature check ends in a reply
(unpaired surrogates, control characters, 40 kB texts, bytes that are not UTF-8), and a request
with a bad signature is a 401 whatever its body, without a traceback (bot/intake.py `storable`,
bot/slack/http_server.py). The Hypothesis fuzz of both adapters is tests/test_intake_fuzz.py."""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.support.model_server import text, tool_calls
from tests.support.slack_api import event_body, mention
from tests.support.slack_rig import SECRET, SlackRig

pytestmark = pytest.mark.rig("slack")

READ_RETRY = ("read_file", {"repo": "payments", "path": "payments/retry.py", "start_line": 1, "end_line": 13})
ANSWER = "It retries 5 times [payments:payments/retry.py#L3]."


def post_bytes(url: str, body: bytes, secret: str = SECRET) -> int:
    """POST raw bytes signed like Slack (v0 HMAC over the bytes as sent); the HTTP status."""
    stamp = str(int(time.time()))
    digest = hmac.new(secret.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": f"v0={digest}",
    }
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


@pytest.fixture
def tracebacks() -> Iterator[list[logging.LogRecord]]:
    """Every record logged with a traceback, by us, bolt or uvicorn (which does not propagate)."""
    found: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = lambda record: found.append(record) if record.exc_info else None  # type: ignore[method-assign]
    loggers = [logging.getLogger(), logging.getLogger("uvicorn"), logging.getLogger("uvicorn.error")]
    for logger in loggers:
        logger.addHandler(handler)
    yield found
    for logger in loggers:
        logger.removeHandler(handler)


def answered(rig: SlackRig, ts: str) -> str:
    """The one reply in the message's thread, once a worker has answered the queued question."""
    rig.settle()
    assert rig.api.reactions("C1", ts) == ["eyes"]  # queued
    rig.model.enqueue(tool_calls(READ_RETRY), text(ANSWER))
    rig.work()
    (reply,) = rig.api.thread_texts("C1", ts)
    assert rig.api.reactions("C1", ts) == ["white_check_mark"]
    return reply


@pytest.mark.parametrize(
    "words",
    [
        "how does retry work? \ud800 and \udfff",  # unpaired surrogates (valid JSON escapes)
        "how does\x00 retry\x1b[31m work?\x07\x9b",  # C0 and C1 control characters
        "how does retry work? " + "retry " * 6_700,  # about 40 kB
    ],
    ids=["unpaired-surrogates", "control-characters", "40-kB"],
)
def test_a_mention_of_odd_text_is_queued_and_answered(rig: SlackRig, words: str) -> None:
    ts = rig.next_ts()
    assert rig.send(mention("C1", ts, words)) == 200
    assert "retries 5 times" in answered(rig, ts)


def test_a_signed_mention_with_bytes_that_are_not_utf8_in_every_field_is_answered(rig: SlackRig) -> None:
    ts = rig.next_ts()
    body = event_body(mention("C1", ts, "how does retry work? BAD", user="UBAD")).encode()
    body = body.replace(b"BAD", b"\xff\xfe\xc3")  # in the text and in the user id
    assert post_bytes(rig.events_url, body) == 200
    assert "retries 5 times" in answered(rig, ts)


@pytest.mark.parametrize(
    "body",
    [b"[]", b"1", b"null", b'"text"', b"{", b"\xff\xfe", b'{"type":"url_verification","challenge":"x"}'],
)
def test_a_request_with_a_bad_signature_is_refused_401_whatever_its_body_without_a_traceback(
    rig: SlackRig, body: bytes, tracebacks: list[logging.LogRecord]
) -> None:
    assert post_bytes(rig.events_url, body, secret="not-the-secret") == 401
    rig.settle()
    assert tracebacks == [] and rig.question_jobs() == []


@pytest.mark.parametrize("body", [b"[]", b"1", b"null", b'"text"', b"[{}]"])
def test_a_signed_json_body_that_is_not_an_object_is_a_clean_400_without_a_traceback(
    rig: SlackRig, body: bytes, tracebacks: list[logging.LogRecord]
) -> None:
    assert post_bytes(rig.events_url, body) == 400
    rig.settle()
    assert tracebacks == [] and rig.question_jobs() == []
