"""What a platform's thread reader gives the worker, and how it says it could not.

A reader is called with the channel, thread and message of the question's ReplyTarget, which
come from the platform's event, never from the text of any message: a question reads its own
thread (and its own message) and nothing else. It returns the thread's messages written before
the question (root first, oldest first), the bot's own left out (its answers are thread memory
already: worker/jobs/threads.py), then the question's own message marked `asking` when the
platform gave it (its words are the question: only its files are context), and raises
ThreadUnreadable when the platform would not tell (no permission, an error, down).

A message's attached files come as ThreadFile: what the platform says of them (hints only) and
how to download one (`fetch`, made by the platform's reader: it alone knows which hosts may
get which credentials). The worker decides which to download (worker/conversation/files.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from config.settings import Settings

MAX_MESSAGES_READ = 5_000  # a reader pages no further: the budget keeps far fewer anyway

# Why a file was not read (whole): the asker is told, one line each (worker/jobs/texts.py)
FileProblem = Literal[
    "binary",  # not text (a NUL byte, control characters, or an image/video/audio type)
    "deleted",  # the platform keeps only a trace of it
    "hidden",  # the workspace's plan hides it (Slack's `hidden_by_limit`)
    "external",  # a link to a file stored elsewhere (Google Drive, …): not the platform's
    "host",  # its URL is not on the platform's own file host: no request is made
    "timeout",
    "not_found",  # 404 / 410
    "forbidden",  # 401 / 403
    "refused",  # a redirect (Slack sends one to its login page without `files:read`) or another status
    "too_large",  # the host sent far more than asked for without its end
    "failed",  # the connection failed
    "too_many",  # beyond the files one question reads
]


@dataclass(frozen=True)
class Fetched:
    data: bytes  # the file, or its last bytes when `cut`
    cut: bool = False  # the file is longer: `data` is its end


class FileUnreadable(Exception):
    """A download that did not give the file; `problem` says why, in the asker's terms."""

    def __init__(self, problem: FileProblem, detail: str = "") -> None:
        super().__init__(detail or problem)
        self.problem: FileProblem = problem


class FileFetch(Protocol):
    def __call__(self, max_bytes: int, timeout: float) -> Fetched:
        """The file, or its last `max_bytes`, within `timeout` seconds; raises FileUnreadable."""
        ...


@dataclass(frozen=True)
class ThreadFile:
    name: str  # as the platform shows it (hostile text)
    size: int | None = None  # bytes, as the platform says (a hint)
    mimetype: str = ""  # as the platform says (a hint: only media types are trusted to be binary)
    fetch: FileFetch | None = field(default=None, repr=False, compare=False)  # None: see `problem`
    problem: FileProblem | None = None  # why it cannot be downloaded at all


@dataclass(frozen=True)
class ThreadMessage:
    author: str  # the author's display name as the platform shows it (hostile text)
    text: str  # as written (hostile text: redacted and made inert before any use)
    deleted: bool = False  # a deleted message the platform still shows a trace of
    files: tuple[ThreadFile, ...] = ()  # its attached files, in the platform's order
    asking: bool = False  # the question's own message: only its files are context
    attachment: str = ""  # not a message: the text of the file of this name attached to the one before


class ThreadUnreadable(Exception):
    """The platform did not give the thread's messages (its error is the cause)."""


class ThreadReader(Protocol):
    def __call__(
        self, settings: Settings, channel: str, thread: str, before: str | None
    ) -> list[ThreadMessage]:
        """The messages of `thread` in `channel` written before message `before`, root first,
        oldest first, at most MAX_MESSAGES_READ, then message `before` itself (`asking`) when
        the platform gives it; `thread == before`: the question opened its thread, only its
        own message is read. Raises ThreadUnreadable."""
        ...


@dataclass(frozen=True)
class FileNote:
    """What the asker is told of one attached file that was not read whole."""

    name: str  # redacted, inert, one line
    problem: FileProblem | None = None  # None: read, but only its end (`cut`)
