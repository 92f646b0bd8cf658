"""Slack request signatures at the edges: every request that is not exactly what Slack signed,
when it signed it, is refused with a 4xx, enqueues nothing, posts nothing, and the adapter goes
on serving the next valid request. Sent over a raw socket so every header can be wrong.
"""

from __future__ import annotations

import http.client
import select
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

import pytest
from slack_sdk.signature import SignatureVerifier

from tests.support.slack_api import command_body, event_body, mention
from tests.support.slack_rig import SECRET, SlackRig, build_slack_rig
from worker.jobs.queue import ADMIN_QUEUE

Headers = dict[str, str]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlackRig]:
    rig = build_slack_rig(
        tmp_path_factory.mktemp("signatures"), admins="slack:UADMIN", rate_limit_questions=1000
    )
    yield from rig


def sign(body: str | bytes, stamp: str, secret: str = SECRET) -> str:
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    return SignatureVerifier(secret).generate_signature(timestamp=stamp, body=text) or ""


def post(rig: SlackRig, body: bytes, headers: Headers, content_type: str = "application/json") -> int:
    """A raw POST: exactly these headers (Content-Length too, unless given) and this body."""
    connection = http.client.HTTPConnection("127.0.0.1", rig.server.port, timeout=10)
    try:
        connection.putrequest("POST", "/slack/events", skip_accept_encoding=True)
        sent = {"Content-Type": content_type, "Content-Length": str(len(body)), **headers}
        for name, value in sent.items():
            if value is not None:
                connection.putheader(name, value)
        connection.endheaders()
        assert connection.sock is not None
        # A refusal can come before the body is read (413): take it then rather than write into
        # a closed connection.
        if len(body) < 65536 or not select.select([connection.sock], [], [], 0.5)[0]:
            connection.send(body)
        return connection.getresponse().status
    finally:
        connection.close()


def fresh_event(rig: SlackRig) -> bytes:
    return event_body(mention("C1", rig.next_ts(), "how does retry work?")).encode()


def now() -> str:
    return str(int(time.time()))


def signed(body: bytes, stamp: str | None = None) -> Headers:
    stamp = stamp or now()
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": sign(body, stamp)}


def tampered(body: bytes) -> bytes:
    return body.replace(b"how does retry work?", b"how does retry work!")


ATTACKS: dict[str, Callable[[bytes], tuple[bytes, Headers]]] = {
    "no signature headers": lambda b: (b, {}),
    "no signature": lambda b: (b, {"X-Slack-Request-Timestamp": now()}),
    "no timestamp": lambda b: (b, {"X-Slack-Signature": sign(b, now())}),
    "an empty signature": lambda b: (b, {**signed(b), "X-Slack-Signature": ""}),
    "version prefix v1": lambda b: (
        b,
        {**signed(b), "X-Slack-Signature": "v1=" + signed(b)["X-Slack-Signature"][3:]},
    ),
    "no version prefix": lambda b: (
        b,
        {**signed(b), "X-Slack-Signature": signed(b)["X-Slack-Signature"][3:]},
    ),
    "upper-case hex": lambda b: (
        b,
        {**signed(b), "X-Slack-Signature": "v0=" + signed(b)["X-Slack-Signature"][3:].upper()},
    ),
    "a truncated signature": lambda b: (
        b,
        {**signed(b), "X-Slack-Signature": signed(b)["X-Slack-Signature"][:-1]},
    ),
    "replayed with a fresh timestamp": lambda b: (
        b,
        {"X-Slack-Request-Timestamp": now(), "X-Slack-Signature": sign(b, str(int(time.time()) - 60))},
    ),
    "signed 301 s in the future": lambda b: (b, signed(b, str(int(time.time()) + 301))),
    "signed 301 s ago": lambda b: (b, signed(b, str(int(time.time()) - 301))),
    "signed at the epoch": lambda b: (b, signed(b, "0")),
    "a negative timestamp": lambda b: (b, signed(b, "-5")),
    "a non-numeric timestamp": lambda b: (b, signed(b, "abc")),
    "a fractional timestamp": lambda b: (b, signed(b, now() + ".5")),
    "a timestamp with spaces": lambda b: (b, signed(b, f" {now()} ")),
    "a 5000-digit timestamp": lambda b: (b, signed(b, "9" * 5000)),
    "a body tampered after signing": lambda b: (tampered(b), signed(b)),
    "the signature of a different secret": lambda b: (
        b,
        {"X-Slack-Request-Timestamp": now(), "X-Slack-Signature": sign(b, now(), "another-app")},
    ),
    "a body over 1 MB, signed": lambda b: (
        (big := b[:-1] + b', "pad": "' + b"x" * 1_000_001 + b'"}'),
        signed(big),
    ),
    "signed JSON that does not parse": lambda b: (b"{nope", signed(b"{nope")),
    "signed bytes that are not UTF-8": lambda b: (b"\xff\xfe{}", signed(b"\xff\xfe{}")),
    "signed JSON nested 100000 deep": lambda b: (b"[" * 100_000, signed(b"[" * 100_000)),
    "a Content-Length that is not a number": lambda b: (b, {**signed(b), "Content-Length": "12abc"}),
    "a negative Content-Length": lambda b: (b, {**signed(b), "Content-Length": "-1"}),
    "a Content-Length over 1 MB": lambda b: (b, {**signed(b), "Content-Length": "99999999"}),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_request_not_signed_exactly_by_slack_is_refused_and_the_next_valid_one_is_served(
    rig: SlackRig, attack: str
) -> None:
    body, headers = ATTACKS[attack](fresh_event(rig))
    status = post(rig, body, headers)
    rig.settle()
    assert 400 <= status < 500, (attack, status)
    assert rig.question_jobs() == []
    assert [c.method for c in rig.api.calls if c.method != "auth.test"] == []
    valid = fresh_event(rig)
    assert post(rig, valid, signed(valid)) == 200
    rig.settle()
    assert len(rig.question_jobs()) == 1
    rig.redis.delete("rq:queue:codebot-questions")
    rig.api.calls.clear()
    rig.api.messages.clear()


def test_an_exact_replay_within_the_window_is_accepted_but_answered_once(rig: SlackRig) -> None:
    body = fresh_event(rig)
    headers = signed(body)
    assert [post(rig, body, headers) for _ in range(3)] == [200, 200, 200]
    rig.settle()
    assert len(rig.question_jobs()) == 1
    assert len(rig.api.calls_to("reactions.add")) == 1
    rig.redis.delete("rq:queue:codebot-questions")
    rig.api.calls.clear()


def test_a_slash_command_with_its_user_changed_after_signing_is_refused(rig: SlackRig) -> None:
    genuine = command_body("refresh all", user="UNOBODY", response_url=rig.api.response_url())
    headers = signed(genuine.encode())
    forged = urlencode({**dict(parse_qsl(genuine)), "user_id": "UADMIN"}).encode()
    assert post(rig, forged, headers, content_type="application/x-www-form-urlencoded") == 401
    assert rig.redis.llen(f"rq:queue:{ADMIN_QUEUE}") == 0
    assert rig.api.calls_to("response_url") == []


def test_a_request_that_stalls_mid_body_does_not_hold_up_the_next_one(rig: SlackRig, tmp_path: Path) -> None:
    stalled = http.client.HTTPConnection("127.0.0.1", rig.server.port, timeout=10)
    stalled.putrequest("POST", "/slack/events")
    stalled.putheader("Content-Length", "5000")
    stalled.endheaders()
    stalled.send(b'{"type": "event_callback", ')  # and never the rest
    try:
        valid = fresh_event(rig)
        assert post(rig, valid, signed(valid)) == 200
        # served while the stalled request is still open and unanswered, not after its timeout
        assert stalled.sock is not None and select.select([stalled.sock], [], [], 0)[0] == []
    finally:
        stalled.close()
    rig.settle()
    rig.redis.delete("rq:queue:codebot-questions")
    rig.api.calls.clear()
