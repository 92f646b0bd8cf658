"""Hypothesis over the adapters' real intake: whatever a platform delivers, a mention ends in 👀
(queued) or a reply, a request ends in a clean status, and nothing ends in silence or a 500.

Slack: signed requests through the real slack-bolt app on the real HTTP server (tests/support/
slack_rig.py). Discord: MESSAGE_CREATE payloads through the fake gateway to the real discord.py
adapter (tests/support/discord_rig.py). Example counts are modest: the suite stays fast.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.discord_rig import DiscordRig, discord_rig
from tests.support.slack_api import BOT_USER_ID, event_body, mention
from tests.support.slack_rig import SlackRig, build_slack_rig, wait_until
from tests.test_intake_odd_input import post_bytes

FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
NO_LIMITS = {"rate_limit_questions": 10_000, "queue_max_depth": 10_000}

ODD = st.sampled_from(
    ["\ud800", "\udfff", "\x00", "\x07", "\x1b[31m", "\x9b", "\u202e", "💥", "é", "\n", "<!here>"]
)
# Words as a user or a broken client might send them: any code point (surrogates too), odd
# pieces, and now and then a long run (up to ~40 kB).
WORDS = st.one_of(
    st.text(st.characters(exclude_categories=()), max_size=200),
    st.lists(st.one_of(ODD, st.text(max_size=5)), max_size=30).map("".join),
    st.tuples(st.text(min_size=1, max_size=8), st.integers(1, 5_000)).map(lambda pair: pair[0] * pair[1]),
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(st.characters(exclude_categories=()), max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def slack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlackRig]:
    yield from build_slack_rig(tmp_path_factory.mktemp("slack"), **NO_LIMITS)


@pytest.fixture(scope="module")
def discord(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DiscordRig]:
    with discord_rig(Path(tmp_path_factory.mktemp("discord")), **NO_LIMITS) as rig:
        yield rig


def answered_or_queued(rig: SlackRig, ts: str) -> bool:
    return rig.api.reactions("C1", ts) == ["eyes"] or bool(rig.api.thread_texts("C1", ts))


@FUZZ
@given(words=WORDS, user=st.one_of(st.just("U1"), WORDS.filter(bool)), raw=st.booleans())
def test_every_signed_slack_mention_is_queued_or_answered(
    slack: SlackRig, words: str, user: str, raw: bool
) -> None:
    ts = slack.next_ts()
    body = event_body(mention("C1", ts, words, user=user)).encode()
    if raw:  # bytes that are not UTF-8, signed as sent
        body = body.replace(f"<@{BOT_USER_ID}>".encode(), f"<@{BOT_USER_ID}> \xff\xfe".encode("latin-1"))
    assert post_bytes(slack.events_url, body) == 200
    slack.settle()
    wait_until(lambda: answered_or_queued(slack, ts), timeout=10)


@FUZZ
@given(payload=JSON)
def test_any_signed_json_gets_a_clean_status_never_a_500(slack: SlackRig, payload: Any) -> None:
    body = json.dumps(payload, ensure_ascii=True).encode()
    assert post_bytes(slack.events_url, body) in (200, 400, 404)


@FUZZ
@given(body=st.binary(max_size=2_000) | JSON.map(lambda value: json.dumps(value).encode()))
def test_any_request_with_a_bad_signature_is_a_401(slack: SlackRig, body: bytes) -> None:
    assert post_bytes(slack.events_url, body, secret="not-the-secret") == 401


@FUZZ
@given(words=WORDS)
def test_every_discord_mention_is_queued_or_answered(discord: DiscordRig, words: str) -> None:
    asked = discord.mention(words)
    fake = discord.fake

    def replied() -> bool:
        return any(
            str((m.get("message_reference") or {}).get("message_id")) == asked["id"]
            for m in fake.posted(fake.channel_id)
        )

    fake.wait_for(lambda: ("PUT", "👀") in discord.reactions(asked["id"]) or replied(), timeout=10)
