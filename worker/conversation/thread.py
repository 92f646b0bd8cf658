"""What a platform's thread reader gives the worker, and how it says it could not.

A reader is called with the channel and thread of the question's ReplyTarget, which come from
the platform's event, never from the text of any message: a question reads its own thread and
nothing else. It returns the thread's messages written before the question (root first, oldest
first), the bot's own left out (its answers are thread memory already: worker/jobs/threads.py),
and raises ThreadUnreadable when the platform would not tell (no permission, an error, down).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from config.settings import Settings

MAX_MESSAGES_READ = 5_000  # a reader pages no further: the budget keeps far fewer anyway


@dataclass(frozen=True)
class ThreadMessage:
    author: str  # the author's display name as the platform shows it (hostile text)
    text: str  # as written (hostile text: redacted and made inert before any use)
    deleted: bool = False  # a deleted message the platform still shows a trace of


class ThreadUnreadable(Exception):
    """The platform did not give the thread's messages (its error is the cause)."""


class ThreadReader(Protocol):
    def __call__(
        self, settings: Settings, channel: str, thread: str, before: str | None
    ) -> list[ThreadMessage]:
        """The messages of `thread` in `channel` written before message `before` (excluded),
        root first, oldest first, at most MAX_MESSAGES_READ; raises ThreadUnreadable."""
        ...
