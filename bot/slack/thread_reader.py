"""The earlier messages of the Slack thread a question was asked in (`conversations.replies`).

Called by the worker as the question's job starts (worker/jobs/question_context.py), never by
the adapter's listener: the event is acked first, the slow read happens later. Only the
channel and thread_ts of the question's event are read. Needs `channels:history` (public
channels), `groups:history` (private), `im:history` and `mpim:history` (DMs), and `files:read`
for the files attached to its messages (bot/slack/files.py): docs/slack.md.

- Pages of `PAGE_SIZE` replies, oldest first, up to MAX_MESSAGES_READ in all.
- The bot's own messages are left out (its answers are thread memory already); so is anything
  written after the question, and any message of another thread. The question's own message
  comes last, marked `asking` (its files are context). A question that opened its thread reads
  the same way: `conversations.replies` with its own ts gives its message alone.
- A deleted root that still has replies comes back as a `tombstone`: kept, as deleted.
- Authors by display name (`users.info`, once per user per read, NAME_LOOKUPS at once; the user
  id when that fails), looked up only for the messages the budget could keep (the root and
  the newest `thread_context_messages`): the others are never shown.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.slack.files import slack_files
from bot.slack.sink import make_client
from config.settings import Settings
from worker.conversation.thread import MAX_MESSAGES_READ, ThreadMessage, ThreadUnreadable

PAGE_SIZE = 200
_identities: dict[str, dict[str, Any]] = {}  # sha256(token, API URL) -> auth.test's answer
_identities_lock = threading.Lock()
NAME_LOOKUPS = 8  # users.info calls in flight at once (a Tier 4 method: 100+ a minute)


def read_thread(settings: Settings, channel: str, thread: str, before: str | None) -> list[ThreadMessage]:
    try:
        client = make_client(settings)
        me = _bot_identity(client, settings)
        raw = _replies(client, channel, thread)
        own = {me.get("user_id"), me.get("bot_id")} - {None}
        items = [
            item
            for item in raw
            if item.get("thread_ts", item.get("ts")) == thread
            and (before is None or _ts_key(str(item.get("ts", ""))) <= _ts_key(before))
            and not own & {item.get("user"), item.get("bot_id")}
        ]
        keepable = [*items[:1], *items[1:][-(settings.thread_context_messages + 1) :]]
        names = _display_names(client, {str(item.get("user")) for item in keepable if _looked_up(item)})
        return [_message(settings, item, names, asking=item.get("ts") == before) for item in items]
    except (SlackApiError, SlackClientError, OSError, RuntimeError, ValueError) as exc:
        raise ThreadUnreadable(str(exc)) from exc


def _bot_identity(client: WebClient, settings: Settings) -> dict[str, Any]:
    """The bot's own user and bot ids (auth.test), asked once per token and process: they never
    change for a token, and every question's read would otherwise pay a round trip for them."""
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else ""
    key = hashlib.sha256(f"{token}\0{settings.slack_api_url}".encode()).hexdigest()
    with _identities_lock:
        known = _identities.get(key)
    if known is None:
        answer = client.auth_test()
        known = {"user_id": answer.get("user_id"), "bot_id": answer.get("bot_id")}
        with _identities_lock:
            _identities[key] = known
    return known


def _replies(client: WebClient, channel: str, thread: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    cursor: str | None = None
    while len(messages) < MAX_MESSAGES_READ:
        page = client.conversations_replies(channel=channel, ts=thread, limit=PAGE_SIZE, cursor=cursor)
        messages.extend(item for item in page.get("messages") or [] if isinstance(item, dict))
        cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
        if not page.get("has_more") or not cursor:
            break
    return messages[:MAX_MESSAGES_READ]


def _message(
    settings: Settings, item: dict[str, Any], names: dict[str, str], *, asking: bool
) -> ThreadMessage:
    deleted = item.get("subtype") == "tombstone"
    text = str(item.get("text") or "")
    files = slack_files(settings, item)
    return ThreadMessage(_author(item, names), text, deleted, files=files, asking=asking)


def _looked_up(item: dict[str, Any]) -> bool:
    """Whether the author's name needs users.info (a bot's message carries its own)."""
    profile = item.get("bot_profile") or {}
    return bool(item.get("user")) and not (
        item.get("bot_id") and (item.get("username") or profile.get("name"))
    )


def _author(item: dict[str, Any], names: dict[str, str]) -> str:
    profile = item.get("bot_profile") or {}
    if item.get("bot_id") and (item.get("username") or profile.get("name")):
        return str(item.get("username") or profile.get("name"))
    user = str(item.get("user") or "someone")
    return names.get(user, user)


def _display_names(client: WebClient, users: Iterable[str]) -> dict[str, str]:
    wanted = sorted(users)
    if not wanted:
        return {}
    with ThreadPoolExecutor(min(NAME_LOOKUPS, len(wanted)), thread_name_prefix="slack-names") as pool:
        return dict(zip(wanted, pool.map(lambda user: _display_name(client, user), wanted), strict=True))


def _display_name(client: WebClient, user: str) -> str:
    try:
        info = client.users_info(user=user).get("user") or {}
    except SlackApiError:  # no users:read, a deleted user: the id still tells authors apart
        return user
    profile = info.get("profile") or {}
    return str(profile.get("display_name") or profile.get("real_name") or info.get("name") or user)


def _ts_key(ts: str) -> tuple[int, int]:
    seconds, _, micros = ts.partition(".")
    return int(seconds or 0), int(micros or 0)
