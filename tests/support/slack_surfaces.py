"""The fake Slack Web API's AI-app surface: chat streaming, task cards, loading states, Block
Kit checks (feedback buttons), the Assistant thread methods and modals, as Slack documents
them (docs.slack.dev reference pages of each method; the errors are theirs).

- `chat.startStream` (channel, thread_ts; recipient_user_id + recipient_team_id required
  outside DMs) opens a message in streaming state, locked to the shape of its first call:
  `markdown_text` or `chunks` (markdown_text, task_update, plan_update, blocks). Appends in the
  other shape get `streaming_mode_mismatch`; both at once `cannot_provide_both_markdown_text_and_chunks`.
  `chat.appendStream` adds to it, `chat.stopStream` adds its last chunks and its `blocks` and
  ends it; after that both get `message_not_in_streaming_state`. `chat.update` of a message
  still streaming gets `streaming_state_conflict`. markdown_text over 12,000 characters in one
  call: `msg_too_long`.
- Every message keeps `states`: what a reader saw after each call (its text, then its task
  cards), so tests can watch an answer grow.
- Blocks (postMessage, update, stopStream) are checked: at most 50, section text at most 3,000,
  `context_actions` holding at most 5 `feedback_buttons`/`icon_button` elements whose buttons
  have plain_text text (at most 75) and a value (at most 2,000): `invalid_blocks` otherwise.
- `assistant.threads.setStatus|setSuggestedPrompts|setTitle` and `views.open` are recorded.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

STREAM_TEXT_LIMIT = 12_000
TASK_STATUSES = {"pending", "in_progress", "complete", "error"}
CHUNK_TYPES = {"markdown_text", "task_update", "plan_update", "blocks"}


@dataclass
class Posted:
    channel: str
    ts: str
    thread_ts: str | None
    text: str
    reactions: list[str] = field(default_factory=list)
    blocks: list[dict[str, Any]] = field(default_factory=list)
    streaming: bool = False
    mode: str = ""  # a stream's shape: "markdown_text" or "chunks"
    tasks: dict[str, tuple[str, str]] = field(default_factory=dict)  # task id -> (title, status)
    states: list[str] = field(default_factory=list)  # what a reader saw after each call

    def seen(self) -> None:
        cards = "".join(f"\n[{status}] {title}" for title, status in self.tasks.values())
        state = self.text + cards
        if not self.states or self.states[-1] != state:
            self.states.append(state)


def invalid_blocks(blocks: object) -> str | None:
    """Slack's error for blocks it would refuse, or None."""
    if not isinstance(blocks, list):
        return "invalid_blocks_format"
    if len(blocks) > 50:
        return "msg_blocks_too_many"
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "section":
            text = block.get("text") or {}
            if text.get("type") not in ("mrkdwn", "plain_text") or len(text.get("text", "")) > 3000:
                return "invalid_blocks"
        elif kind == "context_actions":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= 5:
                return "invalid_blocks"
            if any(_bad_element(element) for element in elements):
                return "invalid_blocks"
        elif kind not in ("markdown", "divider", "context", "actions", "rich_text", "header"):
            return "invalid_blocks"
    return None


def _bad_element(element: dict[str, Any]) -> bool:
    if element.get("type") == "icon_button":
        return not element.get("icon") or not element.get("text")
    if element.get("type") != "feedback_buttons" or len(element.get("action_id", "")) > 255:
        return True
    for side in ("positive_button", "negative_button"):
        button = element.get(side) or {}
        text = button.get("text") or {}
        value = button.get("value")
        if text.get("type") != "plain_text" or not 0 < len(text.get("text", "")) <= 75:
            return True
        if not isinstance(value, str) or not 0 < len(value) <= 2000:
            return True
    return False


def _invalid_chunks(chunks: object) -> str | None:
    if not isinstance(chunks, list) or not chunks:
        return "invalid_chunks"
    for chunk in chunks:
        kind = chunk.get("type") if isinstance(chunk, dict) else None
        if kind not in CHUNK_TYPES:
            return "invalid_chunks"
        if kind == "markdown_text" and not isinstance(chunk.get("text"), str):
            return "invalid_chunks"
        if kind == "task_update" and (
            not chunk.get("id") or not chunk.get("title") or chunk.get("status") not in TASK_STATUSES
        ):
            return "invalid_chunks"
        if kind == "blocks" and invalid_blocks(chunk.get("blocks")):
            return "invalid_blocks"
    return None


class Surfaces:
    """State and answers for the methods above; the SlackAPI calls `answer` under its lock."""

    def __init__(self, messages: list[Posted], next_ts: itertools.count[int]) -> None:
        self.messages = messages
        self._ts = next_ts
        self.statuses: list[tuple[str, str, str]] = []  # (channel, thread, status), in order
        self.prompts: list[dict[str, Any]] = []  # setSuggestedPrompts bodies
        self.titles: list[tuple[str, str, str]] = []  # (channel, thread, title)
        self.views: list[dict[str, Any]] = []  # views.open bodies (trigger_id, view)

    def find(self, channel: str, ts: str) -> Posted | None:
        return next((m for m in self.messages if m.channel == channel and m.ts == ts), None)

    def answer(self, method: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """Slack's answer to `method`, or None for a method this class does not speak."""
        handler = {
            "chat.startStream": self._start,
            "chat.appendStream": self._append,
            "chat.stopStream": self._stop,
            "assistant.threads.setStatus": self._status,
            "assistant.threads.setSuggestedPrompts": self._prompts,
            "assistant.threads.setTitle": self._title,
            "views.open": self._view,
        }.get(method)
        return handler(body) if handler else None

    def post(self, body: dict[str, Any]) -> dict[str, Any]:
        error = invalid_blocks(body["blocks"]) if "blocks" in body else None
        if error:
            return {"ok": False, "error": error}
        ts = f"1700000000.{next(self._ts):06d}"
        message = Posted(body["channel"], ts, body.get("thread_ts"), body.get("text", ""))
        message.blocks = list(body.get("blocks") or [])
        message.seen()
        self.messages.append(message)
        return {"ok": True, "channel": body["channel"], "ts": ts, "message_ts": ts}

    def update(self, body: dict[str, Any]) -> dict[str, Any]:
        message = self.find(body["channel"], body["ts"])
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if message.streaming:
            return {"ok": False, "error": "streaming_state_conflict"}
        error = invalid_blocks(body["blocks"]) if "blocks" in body else None
        if error:
            return {"ok": False, "error": error}
        message.text = body.get("text", "")
        if "blocks" in body:
            message.blocks = list(body["blocks"])
        message.tasks = {}  # an update replaces the message, task cards included
        message.seen()
        return {"ok": True, "channel": body["channel"], "ts": body["ts"]}

    def delete(self, body: dict[str, Any]) -> dict[str, Any]:
        message = self.find(body["channel"], body["ts"])
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        self.messages.remove(message)
        return {"ok": True, "channel": body["channel"], "ts": body["ts"]}

    # --- streaming ---------------------------------------------------------------------------
    def _content_error(self, body: dict[str, Any]) -> str | None:
        has_text, has_chunks = body.get("markdown_text") is not None, body.get("chunks") is not None
        if has_text and has_chunks:
            return "cannot_provide_both_markdown_text_and_chunks"
        if has_text and len(body["markdown_text"]) > STREAM_TEXT_LIMIT:
            return "msg_too_long"
        if has_chunks:
            error = _invalid_chunks(body["chunks"])
            if error:
                return error
            text = sum(len(c.get("text", "")) for c in body["chunks"] if c.get("type") == "markdown_text")
            if text > STREAM_TEXT_LIMIT:
                return "msg_too_long"
        return None

    @staticmethod
    def _apply(message: Posted, body: dict[str, Any]) -> None:
        if body.get("markdown_text") is not None:
            message.text += body["markdown_text"]
        for chunk in body.get("chunks") or []:
            if chunk["type"] == "markdown_text":
                message.text += chunk["text"]
            elif chunk["type"] == "task_update":
                message.tasks[chunk["id"]] = (chunk["title"], chunk["status"])
            elif chunk["type"] == "blocks":
                message.blocks.extend(chunk["blocks"])

    def _start(self, body: dict[str, Any]) -> dict[str, Any]:
        channel = body.get("channel")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not body.get("thread_ts"):
            return {"ok": False, "error": "invalid_arguments"}
        if not channel.startswith("D"):  # required when streaming to channels, not in DMs
            if not body.get("recipient_user_id"):
                return {"ok": False, "error": "missing_recipient_user_id"}
            if not body.get("recipient_team_id"):
                return {"ok": False, "error": "missing_recipient_team_id"}
        error = self._content_error(body)
        if error:
            return {"ok": False, "error": error}
        ts = f"1700000000.{next(self._ts):06d}"
        message = Posted(channel, ts, body["thread_ts"], "", streaming=True)
        message.mode = "chunks" if body.get("chunks") is not None else "markdown_text"
        self._apply(message, body)
        message.seen()
        self.messages.append(message)
        return {"ok": True, "channel": channel, "ts": ts}

    def _streaming(self, body: dict[str, Any]) -> tuple[Posted | None, dict[str, Any] | None]:
        message = self.find(body.get("channel", ""), body.get("ts", ""))
        if message is None:
            return None, {"ok": False, "error": "message_not_found"}
        if not message.streaming:
            return None, {"ok": False, "error": "message_not_in_streaming_state"}
        error = self._content_error(body)
        if error:
            return None, {"ok": False, "error": error}
        shape = "chunks" if body.get("chunks") is not None else "markdown_text"
        if (
            body.get("chunks") is not None or body.get("markdown_text") is not None
        ) and shape != message.mode:
            return None, {"ok": False, "error": "streaming_mode_mismatch"}
        return message, None

    def _append(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("chunks") is None and body.get("markdown_text") is None:
            return {"ok": False, "error": "markdown_text_or_chunks_required"}
        message, refusal = self._streaming(body)
        if message is None:
            return refusal or {"ok": False}
        self._apply(message, body)
        message.seen()
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _stop(self, body: dict[str, Any]) -> dict[str, Any]:
        message, refusal = self._streaming(body)
        if message is None:
            return refusal or {"ok": False}
        error = invalid_blocks(body["blocks"]) if body.get("blocks") is not None else None
        if error:
            return {"ok": False, "error": error}
        self._apply(message, body)
        message.blocks.extend(body.get("blocks") or [])
        message.streaming = False
        message.seen()
        return {"ok": True, "channel": message.channel, "ts": message.ts, "message": {"ts": message.ts}}

    # --- the Assistant and modals ------------------------------------------------------------
    def _status(self, body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("channel_id") or not body.get("thread_ts") or "status" not in body:
            return {"ok": False, "error": "invalid_arguments"}
        self.statuses.append((body["channel_id"], body["thread_ts"], body["status"]))
        return {"ok": True}

    def _prompts(self, body: dict[str, Any]) -> dict[str, Any]:
        prompts = body.get("prompts")
        if not body.get("channel_id") or not isinstance(prompts, list) or not 1 <= len(prompts) <= 4:
            return {"ok": False, "error": "invalid_arguments"}
        if any(not p.get("title") or not p.get("message") for p in prompts):
            return {"ok": False, "error": "invalid_arguments"}
        self.prompts.append(body)
        return {"ok": True}

    def _title(self, body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("channel_id") or not body.get("thread_ts") or not body.get("title"):
            return {"ok": False, "error": "invalid_arguments"}
        self.titles.append((body["channel_id"], body["thread_ts"], body["title"]))
        return {"ok": True}

    def _view(self, body: dict[str, Any]) -> dict[str, Any]:
        view = body.get("view")
        if isinstance(view, str):
            view = json.loads(view)
        if not body.get("trigger_id") or not isinstance(view, dict) or view.get("type") != "modal":
            return {"ok": False, "error": "invalid_arguments"}
        self.views.append({"trigger_id": body["trigger_id"], "view": view})
        return {"ok": True, "view": {**view, "id": f"V{len(self.views):04d}"}}
