"""What Slack sends an app when someone uses its AI-app surface, as Slack documents it:

- `assistant_thread_started` (Events API): a user opened a thread with the app in the Agents &
  AI Apps side panel (docs.slack.dev/reference/events/assistant_thread_started);
- `block_actions` (interactivity, form-encoded `payload=`): a click on the feedback buttons
  (`feedback_buttons` element in a `context_actions` block) of one of the bot's messages, built
  from the blocks the bot really posted;
- `view_submission`: a modal the bot opened with `views.open`, submitted with values.
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any
from urllib.parse import urlencode

from tests.support.slack_api import BOT_USER_ID, TEAM_ID
from tests.support.slack_surfaces import Posted

_triggers = itertools.count(1)


def assistant_thread_started(
    user: str,
    dm_channel: str,
    thread_ts: str,
    context_channel: str | None = None,
    kind: str = "assistant_thread_started",
) -> dict[str, Any]:
    """`assistant_thread_started` (or, with `kind`, `assistant_thread_context_changed`)."""
    context: dict[str, Any] = {"team_id": TEAM_ID, "enterprise_id": None}
    if context_channel:
        context["channel_id"] = context_channel
    return {
        "type": kind,
        "assistant_thread": {
            "user_id": user,
            "context": context,
            "channel_id": dm_channel,
            "thread_ts": thread_ts,
        },
        "event_ts": f"{time.time():.6f}",
    }


def _user(user: str) -> dict[str, Any]:
    return {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM_ID}


def feedback_click(message: Posted, positive: bool, user: str = "U1") -> dict[str, Any]:
    """The block_actions payload of a click on the 👍 (positive) or 👎 of `message`."""
    for block in message.blocks:
        if block.get("type") != "context_actions":
            continue
        for element in block["elements"]:
            if element.get("type") == "feedback_buttons":
                button = element["positive_button" if positive else "negative_button"]
                action = {
                    "type": "feedback_buttons",
                    "action_id": element.get("action_id", ""),
                    "block_id": block.get("block_id", "b"),
                    "value": button["value"],
                    "text": button["text"],
                    "action_ts": f"{time.time():.6f}",
                }
                return _block_actions(message, action, user)
    raise AssertionError(f"message {message.ts} has no feedback buttons: {message.blocks}")


def _block_actions(message: Posted, action: dict[str, Any], user: str) -> dict[str, Any]:
    container = {
        "type": "message",
        "message_ts": message.ts,
        "channel_id": message.channel,
        "is_ephemeral": False,
    }
    if message.thread_ts:
        container["thread_ts"] = message.thread_ts
    return {
        "type": "block_actions",
        "user": _user(user),
        "api_app_id": "A0001",
        "token": "legacy",
        "container": container,
        "trigger_id": f"{next(_triggers)}.1.abc",
        "team": {"id": TEAM_ID, "domain": "test"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": message.channel, "name": "general"},
        "message": {
            "type": "message",
            "user": BOT_USER_ID,
            "ts": message.ts,
            "thread_ts": message.thread_ts,
            "text": message.text,
            "blocks": message.blocks,
        },
        "state": {"values": {}},
        "response_url": "https://hooks.slack.invalid/actions/T0001/1/x",
        "actions": [action],
    }


def view_submission(view: dict[str, Any], values: dict[str, str], user: str = "U1") -> dict[str, Any]:
    """The view_submission payload of `view` (as opened) with its inputs filled: `values` maps
    each input's action_id to the text typed."""
    state: dict[str, dict[str, Any]] = {}
    for block in view.get("blocks", []):
        element = block.get("element") or {}
        if block.get("type") == "input" and element.get("action_id") in values:
            state[block["block_id"]] = {
                element["action_id"]: {"type": element["type"], "value": values[element["action_id"]]}
            }
    return {
        "type": "view_submission",
        "team": {"id": TEAM_ID, "domain": "test"},
        "user": _user(user),
        "api_app_id": "A0001",
        "token": "legacy",
        "trigger_id": f"{next(_triggers)}.2.abc",
        "view": {
            **view,
            "id": "V0001",
            "team_id": TEAM_ID,
            "state": {"values": state},
            "hash": "1.abc",
        },
        "response_urls": [],
        "is_enterprise_install": False,
    }


def form(payload: dict[str, Any]) -> str:
    """An interactivity request body: form-encoded `payload=<json>`."""
    return urlencode({"payload": json.dumps(payload)})
