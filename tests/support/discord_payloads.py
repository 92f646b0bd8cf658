"""Discord API objects as the gateway and REST send them, for the fake Discord.

Ids are real snowflakes (milliseconds since the Discord epoch << 22): 19 digits, so
discord.py's mention regex (15–20 digits) and its timestamps (interaction expiry) work.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

DISCORD_EPOCH_MS = 1420070400000
JOINED = "2025-01-01T00:00:00+00:00"
_counter = itertools.count()
_counter_lock = threading.Lock()


def snowflake() -> str:
    with _counter_lock:
        increment = next(_counter) % (1 << 22)
    return str(((int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22) | increment)


def user(name: str, bot: bool = False) -> dict[str, Any]:
    return {
        "id": snowflake(),
        "username": name,
        "discriminator": "0",
        "global_name": name,
        "avatar": None,
        "bot": bot,
        "public_flags": 0,
    }


def member(of: dict[str, Any] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"roles": [], "joined_at": JOINED, "deaf": False, "mute": False, "flags": 0}
    if of is not None:
        data["user"] = of
    return data


def application(bot_user: dict[str, Any]) -> dict[str, Any]:
    """`/oauth2/applications/@me`: discord.py needs an `owner` (docs/platform-notes.md §2g)."""
    return {
        "id": bot_user["id"],
        "name": "codebot",
        "description": "",
        "icon": None,
        "bot_public": True,
        "bot_require_code_grant": False,
        "verify_key": "0" * 64,
        "flags": 0,
        "owner": user("owner"),
        "team": None,
    }


def text_channel(channel_id: str, guild_id: str, name: str) -> dict[str, Any]:
    return {
        "id": channel_id,
        "type": 0,
        "guild_id": guild_id,
        "name": name,
        "position": 0,
        "permission_overwrites": [],
        "nsfw": False,
        "parent_id": None,
        "topic": None,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "flags": 0,
    }


def dm_channel(channel_id: str, recipient: dict[str, Any]) -> dict[str, Any]:
    return {"id": channel_id, "type": 1, "recipients": [recipient], "last_message_id": None}


def thread(thread_id: str, parent: str, guild_id: str, owner: str, name: str, archive: int) -> dict[str, Any]:
    return {
        "id": thread_id,
        "type": 11,
        "guild_id": guild_id,
        "parent_id": parent,
        "name": name,
        "owner_id": owner,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "message_count": 0,
        "member_count": 1,
        "flags": 0,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": archive,
            "locked": False,
            "archive_timestamp": JOINED,
        },
    }


def message(channel_id: str, author: dict[str, Any], content: str, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": snowflake(),
        "channel_id": channel_id,
        "author": author,
        "content": content,
        "timestamp": JOINED,
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": False,
        "type": 0,
        "flags": 0,
        "components": [],
    }
    data.update(extra)
    return data


def ready(bot_user: dict[str, Any], guild_id: str, gateway_url: str) -> dict[str, Any]:
    return {
        "v": 10,
        "user": bot_user,
        "guilds": [{"id": guild_id, "unavailable": True}],
        "session_id": "fake-session",
        "resume_gateway_url": gateway_url,
        "private_channels": [],
        "relationships": [],
        "application": {"id": bot_user["id"], "flags": 0},
    }


def guild_create(
    guild_id: str, owner: str, channels: list[dict[str, Any]], bot_user: dict[str, Any]
) -> dict[str, Any]:
    everyone = {
        "id": guild_id,
        "name": "@everyone",
        "permissions": "0",
        "position": 0,
        "color": 0,
        "hoist": False,
        "managed": False,
        "mentionable": False,
        "flags": 0,
    }
    return {
        "id": guild_id,
        "name": "Team",
        "icon": None,
        "owner_id": owner,
        "roles": [everyone],
        "channels": channels,
        "threads": [],
        "members": [member(bot_user)],
        "member_count": 2,
        "emojis": [],
        "stickers": [],
        "features": [],
        "large": False,
        "unavailable": False,
        "joined_at": JOINED,
        "presences": [],
        "voice_states": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "premium_tier": 0,
        "mfa_level": 0,
        "verification_level": 0,
        "explicit_content_filter": 0,
        "default_message_notifications": 0,
        "system_channel_flags": 0,
        "preferred_locale": "en-US",
        "nsfw_level": 0,
        "afk_timeout": 300,
    }


def command_interaction(
    application_id: str,
    command_id: str,
    sub: str,
    options: dict[str, str],
    invoker: dict[str, Any],
    channel: dict[str, Any],
    guild_id: str | None,
) -> dict[str, Any]:
    """INTERACTION_CREATE for `/codebot <sub> name:value…` (type 2, a subcommand of a group)."""
    sub_options = [{"name": k, "type": 3, "value": v} for k, v in options.items()]
    data = _interaction_base(2, application_id, invoker, channel, guild_id)
    data["data"] = {
        "id": command_id,
        "name": "codebot",
        "type": 1,
        "options": [{"name": sub, "type": 1, "options": sub_options}],
    }
    if guild_id:
        data["data"]["guild_id"] = guild_id
    return data


def _interaction_base(
    kind: int, application_id: str, invoker: dict[str, Any], channel: dict[str, Any], guild_id: str | None
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": snowflake(),
        "application_id": application_id,
        "type": kind,
        "token": f"tok{snowflake()}",
        "version": 1,
        "channel_id": channel["id"],
        "channel": channel,
        "app_permissions": "0",
        "locale": "en-US",
        "entitlements": [],
        "context": 0 if guild_id else 1,
        "attachment_size_limit": 10485760,
        "authorizing_integration_owners": {"0": guild_id or "0"},
    }
    if guild_id:
        data.update(guild_id=guild_id, guild_locale="en-US", member={**member(invoker), "permissions": "0"})
    else:
        data["user"] = invoker
    return data


def component_interaction(
    application_id: str,
    message: dict[str, Any],
    custom_id: str,
    invoker: dict[str, Any],
    channel: dict[str, Any],
    guild_id: str | None,
) -> dict[str, Any]:
    """INTERACTION_CREATE for a click on a button (type 3, MESSAGE_COMPONENT, component_type 2)."""
    data = _interaction_base(3, application_id, invoker, channel, guild_id)
    data["message"] = message
    data["data"] = {"custom_id": custom_id, "component_type": 2}
    return data


def modal_submit_interaction(
    application_id: str,
    custom_id: str,
    values: dict[str, str],
    invoker: dict[str, Any],
    channel: dict[str, Any],
    guild_id: str | None,
) -> dict[str, Any]:
    """INTERACTION_CREATE for a submitted modal (type 5, MODAL_SUBMIT): each text input (type 4)
    in its action row, with the value typed."""
    data = _interaction_base(5, application_id, invoker, channel, guild_id)
    rows = [
        {"type": 1, "components": [{"type": 4, "custom_id": key, "value": value}]}
        for key, value in values.items()
    ]
    data["data"] = {"custom_id": custom_id, "components": rows}
    return data


def modal_fits(modal: dict[str, Any]) -> bool:
    """Discord's limits on a modal: title and each text input's label at most 45 characters,
    custom_ids at most 100, 1 to 5 rows."""
    inputs = [c for row in modal.get("components") or [] for c in row.get("components") or []]
    return (
        0 < len(modal.get("title") or "") <= 45
        and 0 < len(modal.get("custom_id") or "") <= 100
        and 1 <= len(modal.get("components") or []) <= 5
        and all(0 < len(i.get("label") or "") <= 45 and len(i.get("custom_id") or "") <= 100 for i in inputs)
    )


REPLY = 19  # MessageType.REPLY


def reply_fields(to: dict[str, Any], guild_id: str | None = None) -> dict[str, Any]:
    """What makes a message a reply to `to` (keywords for `FakeDiscord.message_create`): its type
    and `message_reference` (type 0, a reply; the fake adds `referenced_message` when shown)."""
    reference = {"type": 0, "message_id": to["id"], "channel_id": to["channel_id"]}
    if guild_id is not None:
        reference["guild_id"] = guild_id
    return {"type": REPLY, "message_reference": reference}
