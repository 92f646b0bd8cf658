"""Files attached to Discord messages (`attachments` of a REST message), as ThreadFiles.

An attachment's `url` is a signed CDN URL: it is downloaded WITHOUT any token, and only from
Discord's CDN hosts (HTTPS) or the origin of a configured DISCORD_API_URL (a local Discord in
tests); a URL anywhere else gets no request. Redirects are not followed
(worker/conversation/download.py).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from config.settings import Settings
from worker.conversation.download import download, on_allowed_host
from worker.conversation.thread import ThreadFile

DISCORD_FILE_HOSTS = frozenset({"cdn.discordapp.com", "media.discordapp.net"})


def discord_files(settings: Settings, item: dict[str, Any]) -> tuple[ThreadFile, ...]:
    return tuple(discord_file(settings, a) for a in item.get("attachments") or [] if isinstance(a, dict))


def discord_file(settings: Settings, item: dict[str, Any]) -> ThreadFile:
    name = str(item.get("filename") or "")
    size = item.get("size") if isinstance(item.get("size"), int) else None
    mimetype = str(item.get("content_type") or "")
    url = str(item.get("url") or "")
    if not on_allowed_host(url, DISCORD_FILE_HOSTS, settings.discord_api_url):
        return ThreadFile(name, size, mimetype, problem="host")
    return ThreadFile(name, size, mimetype, fetch=partial(download, url, {}, size=size))
