"""Files attached to Slack messages (`files` of a `conversations.replies` item), as ThreadFiles.

A file is downloaded from its `url_private_download` with the bot token (`files:read`), and
only when that URL is on Slack's own file host (`files.slack.com`, HTTPS) or on the host of a
configured SLACK_API_URL (a local Slack in tests, a proxy an operator set up): a URL anywhere
else never gets a request, let alone the token. Redirects are not followed
(worker/conversation/download.py), so the token reaches no other host either way.
Files Slack keeps no content of: `mode` "tombstone" (deleted), "hidden_by_limit" (a free
plan's older files), "external" (Google Drive and the like): named, not downloaded.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from config.settings import Settings
from worker.conversation.download import download, on_allowed_host
from worker.conversation.thread import FileProblem, ThreadFile

SLACK_FILE_HOSTS = frozenset({"files.slack.com"})
_MODES: dict[str, FileProblem] = {"tombstone": "deleted", "hidden_by_limit": "hidden", "external": "external"}


def slack_files(settings: Settings, item: dict[str, Any]) -> tuple[ThreadFile, ...]:
    return tuple(slack_file(settings, f) for f in item.get("files") or [] if isinstance(f, dict))


def slack_file(settings: Settings, item: dict[str, Any]) -> ThreadFile:
    name = str(item.get("name") or item.get("title") or "")
    size = item.get("size") if isinstance(item.get("size"), int) else None
    mimetype = str(item.get("mimetype") or "")
    problem = _MODES.get(str(item.get("mode") or "")) or ("external" if item.get("is_external") else None)
    url = str(item.get("url_private_download") or item.get("url_private") or "")
    if problem is None and not url:
        problem = "refused"
    if problem is None and not on_allowed_host(url, SLACK_FILE_HOSTS, settings.slack_api_url):
        problem = "host"
    if problem is not None or not settings.slack_bot_token:
        return ThreadFile(name, size, mimetype, problem=problem or "refused")
    headers = {"Authorization": f"Bearer {settings.slack_bot_token.get_secret_value()}"}
    return ThreadFile(name, size, mimetype, fetch=partial(download, url, headers, size=size))
