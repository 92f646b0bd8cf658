"""The shipped manifest and `codebot slack` start-up: what a new team relies on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codebot.cli import main
from config.settings import load_settings
from tests.support.slack_api import SlackAPI
from tests.support.slack_interactions import assistant_thread_started
from tests.support.slack_rig import SlackRig
from worker.ops.redis_connection import stop_embedded_server

MANIFEST = Path(__file__).resolve().parent.parent / "config" / "slack-manifest.yml"
EVENT_SCOPES = {
    "app_mention": "app_mentions:read",
    "message.im": "im:history",
    "message.channels": "channels:history",
    "message.groups": "groups:history",
    "assistant_thread_started": "assistant:write",
    "assistant_thread_context_changed": "assistant:write",
}


def manifest_list(key: str) -> list[str]:
    """The items of a YAML block list under `key:` (the manifest is plain enough for this)."""
    block = re.search(rf"^\s*{key}:\n((?:\s+- .*\n)+)", MANIFEST.read_text(), re.MULTILINE)
    assert block, f"no list under {key} in the manifest"
    return [line.strip()[2:] for line in block.group(1).splitlines()]


pytestmark = pytest.mark.rig("slack")


def test_the_manifest_turns_socket_mode_on_and_declares_the_command() -> None:
    text = MANIFEST.read_text()
    assert re.search(r"^\s*socket_mode_enabled: true$", text, re.MULTILINE)
    assert re.search(r"^\s*- command: /codebot$", text, re.MULTILINE)
    assert "commands" in manifest_list("bot")


def test_every_subscribed_event_has_its_scope_and_is_acknowledged(rig: SlackRig) -> None:
    events = manifest_list("bot_events")
    assert set(events) == set(EVENT_SCOPES)
    assert {EVENT_SCOPES[e] for e in events} <= set(manifest_list("bot"))
    for event in events:
        kind = "app_mention" if event == "app_mention" else "message"
        payload = {"type": kind, "user": "U1", "text": "hi", "ts": rig.next_ts(), "channel": "C9"}
        if event.startswith("assistant_thread"):
            payload = assistant_thread_started("U1", "D9", rig.next_ts(), "C9", kind=event)
        assert rig.send(payload) == 200, event  # an unhandled event would get 404 and be retried


def test_the_manifest_turns_interactivity_on_for_the_feedback_buttons() -> None:
    assert re.search(r"^\s*interactivity:\n\s*is_enabled: true$", MANIFEST.read_text(), re.MULTILINE)


def test_codebot_slack_without_a_bot_token_stops_with_one_clear_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["slack"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("codebot: SLACK_BOT_TOKEN: not set")


def test_http_mode_without_a_signing_secret_stops_with_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    assert main(["slack"]) == 2
    assert capsys.readouterr().err.strip().startswith("codebot: SLACK_SIGNING_SECRET: not set")


def test_a_token_slack_refuses_stops_the_adapter_with_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with SlackAPI() as api:
        monkeypatch.setenv("SLACK_API_URL", api.url)
        monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxp-not-a-bot-token")
        monkeypatch.setenv("SLACK_SIGNING_SECRET", "s")
        assert main(["slack"]) == 2
        assert capsys.readouterr().err.strip() == "codebot: SLACK_BOT_TOKEN: Slack refused it (invalid_auth)"
        monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-good")
        monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-revoked")
        try:
            assert main(["slack"]) == 2  # Socket Mode: Slack refuses apps.connections.open
        finally:
            stop_embedded_server(load_settings(env_file=None))
        assert capsys.readouterr().err.strip() == "codebot: SLACK_APP_TOKEN: Slack refused it (invalid_auth)"
        assert api.calls_to("apps.connections.open")[0].headers["Authorization"] == "Bearer xapp-revoked"
