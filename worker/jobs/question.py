"""A question as it travels from a chat adapter through Redis to a worker.

The job id is derived from the platform's identity of the user's message, so a duplicate
delivery of the same message can never create a second job (RQ accepts only [A-Za-z0-9_-]).
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import Literal

from pydantic import BaseModel, Field

Platform = Literal["slack", "discord", "console"]
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
MAX_JOB_ID_CHARS = 120


class ReplyTarget(BaseModel):
    """Where the answer goes and what to react to."""

    platform: Platform
    channel: str  # Slack channel id, Discord channel id, or a console session id
    thread: str | None = None  # Slack thread_ts / Discord thread channel id to answer in
    message: str | None = None  # the asker's message (Slack ts / Discord message id): gets 👀 ✅ ⚠️
    guild: str | None = None  # Discord guild id; None for DMs
    # the message the asker's message replied to, outside a thread (Discord message_reference, from
    # the event, in this channel): its reply chain is the question's context (worker/conversation/chain.py)
    replied_to: str | None = None
    team: str | None = None  # Slack workspace (team) id: a stream in a channel names its recipient's
    is_dm: bool = False
    # Discord application-command follow-ups (valid 15 minutes after the command)
    application_id: str | None = None
    interaction_token: str | None = None

    @property
    def channel_key(self) -> str:
        """The form used in repos.toml allow-lists: `slack:C0123`, `discord:98765`."""
        return f"{self.platform}:{self.channel}"


class Turn(BaseModel):
    question: str
    answer: str


class Question(BaseModel):
    id: str  # the RQ job id, from event_identity()
    asker: str  # platform user id
    target: ReplyTarget
    text: str  # the question, mention and `repo:NAME` removed
    repos: list[str]  # names in scope, already checked against the channel allow-list
    history: list[Turn] = Field(default_factory=list)  # earlier turns of the thread, oldest first
    # `codebot ask --context FILE` / stdin: the pasted log, redacted and within the budget
    # (worker/conversation/); chat questions read their thread as their job starts instead
    pasted: str = ""
    # files the platform's event says the question's message carries: the worker reads them
    # (by the message's ids, never by a URL from the event) as the job starts
    attached_files: int = 0
    created_at: float = Field(default_factory=time.time)


def event_identity(platform: str, *parts: str) -> str:
    """A job id from a platform's message identity, e.g. ("slack", "C1", "1515449522.000016").

    Dots and other characters RQ rejects become `_`; a long identity is shortened with a hash
    so two different messages never share an id.
    """
    raw = "-".join([platform, *parts])
    safe = _UNSAFE.sub("_", raw)
    if len(safe) > MAX_JOB_ID_CHARS or safe != raw.replace(".", "_"):
        digest = hashlib.sha256(raw.encode()).hexdigest()[:16]
        safe = f"{safe[: MAX_JOB_ID_CHARS - 18]}-{digest}"
    return f"q-{safe}"


def reference_id(job_id: str) -> str:
    """Short, stable id shown to the user and written in the logs, e.g. `3f2a9c1d`."""
    return hashlib.sha256(job_id.encode()).hexdigest()[:8]
