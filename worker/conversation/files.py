"""The files attached to a question's thread (and to the question itself), read as text.

Which are downloaded: those of the question's own message first, then the thread's root, then
the newest messages, at most MAX_FILES_READ (the rest are named as not read), and only files
of messages the budget could keep (the root and the newest `thread_context_messages`). They
download at once, each within `thread_context_file_seconds`, each at most
`thread_context_file_bytes` (its end kept: a log says most at its end), so a question waits
for files at most that long and holds at most MAX_FILES_READ times that many bytes.

Text is what the bytes say, not what the platform calls them: no NUL byte in the first block,
valid UTF-8 (else read as latin-1), and next to no control characters. Only a media type (image,
video, audio) is trusted as binary without a download. Each file becomes an entry after its
message (`attachment` set): its text, or a line saying why it was not read, which
worker/conversation/context.py redacts, makes inert and fits to the budget like any message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from config.settings import Settings
from worker.conversation.context import file_name
from worker.conversation.thread import (
    Fetched,
    FileNote,
    FileProblem,
    FileUnreadable,
    ThreadFile,
    ThreadMessage,
)

MAX_FILES_READ = 5
# A character is at most 4 bytes of UTF-8: a file's end longer than this many bytes per
# character of the budget could never be kept, so it is never downloaded (nor decoded, redacted)
MAX_BYTES_PER_CHAR = 4
FIRST_BLOCK_BYTES = 8192  # a NUL byte here and the file is binary
MEDIA_TYPES = ("image/", "video/", "audio/")  # binary whatever their bytes: never downloaded
# text whose first block has more control characters than this share is binary (tabs, line
# ends, form feeds and ESC, of a coloured CI log, are text)
MAX_CONTROL_SHARE = 0.05
TEXT_CONTROLS = "\t\n\r\f\x1b"
FILE_CUT_NOTE = "[…this file is longer than {limit:,} bytes: only its end was read]"
NOT_READ = "[this attached file was not read: {why}]"
WHY = {
    "binary": "it is not a text file",
    "deleted": "it was deleted",
    "hidden": "the workspace's plan hides it",
    "external": "it is stored outside the chat platform",
    "host": "it is not on the platform's own file host",
    "timeout": "its download timed out",
    "not_found": "the platform no longer has it (404)",
    "forbidden": "the platform refused it (403)",
    "refused": "the platform did not give it",
    "too_large": "it is too large to download",
    "failed": "its download failed",
    "too_many": f"a question reads at most {MAX_FILES_READ} files",
}


@dataclass(frozen=True)
class _Read:
    text: str | None  # None: not read, `problem` says why
    problem: FileProblem | None = None
    cut: bool = False


def read_files(
    messages: Sequence[ThreadMessage], settings: Settings, redact: Callable[[str], str]
) -> tuple[list[ThreadMessage], list[FileNote]]:
    """`messages` with an entry after each attached file's message, and the asker's notes."""
    if settings.thread_context_file_bytes <= 0 or not any(m.files for m in messages):
        return list(messages), []
    limit = bytes_worth_reading(settings)
    chosen = _chosen(messages, settings.thread_context_messages)
    fetching = [(m, f) for m, f in chosen[:MAX_FILES_READ] if f.fetch is not None and f.problem is None]
    with ThreadPoolExecutor(max(len(fetching), 1), thread_name_prefix="thread-file") as pool:
        done = list(pool.map(lambda pair: _read(pair[1], settings, limit), fetching))
    results = {id(file): read for (_, file), read in zip(fetching, done, strict=True)}
    reads: dict[int, _Read] = {}
    for index, (_message, file) in enumerate(chosen):
        if index >= MAX_FILES_READ:
            reads[id(file)] = _Read(None, "too_many")
        else:
            reads[id(file)] = results.get(id(file)) or _Read(None, file.problem or "refused")
    out: list[ThreadMessage] = []
    notes: list[FileNote] = []
    for message in messages:
        out.append(message)
        for file in message.files:
            read = reads.get(id(file))
            if read is None:  # its message is beyond what the budget keeps
                continue
            out.append(_entry(message, file, read, limit))
            if read.problem is not None or read.cut:
                notes.append(FileNote(file_name(file.name, redact), read.problem))
    return out, notes


def _chosen(messages: Sequence[ThreadMessage], max_messages: int) -> list[tuple[ThreadMessage, ThreadFile]]:
    """The files the budget could keep, in the order they are worth reading: the question's
    own, the root's, then the newest messages' first."""
    asking = [m for m in messages if m.asking]
    earlier = [m for m in messages if not m.asking]
    root, rest = earlier[:1], earlier[1:]
    newest = list(reversed(rest))[: max(max_messages - 1, 0)]
    return [(m, f) for m in (*asking, *root, *newest) for f in m.files]


def bytes_worth_reading(settings: Settings) -> int:
    """The most of a file's end worth downloading: the byte cap, or what the character budget
    could hold, whichever is less."""
    return min(settings.thread_context_file_bytes, MAX_BYTES_PER_CHAR * settings.thread_context_chars)


def _read(file: ThreadFile, settings: Settings, limit: int) -> _Read:
    if file.mimetype.lower().startswith(MEDIA_TYPES):
        return _Read(None, "binary")
    assert file.fetch is not None
    try:
        fetched = file.fetch(limit, settings.thread_context_file_seconds)
    except FileUnreadable as exc:
        return _Read(None, exc.problem)
    except Exception:  # a reader's bug: this file is not read, the question goes on
        return _Read(None, "failed")
    text = as_text(fetched)
    return _Read(None, "binary") if text is None else _Read(text, cut=fetched.cut)


def as_text(fetched: Fetched) -> str | None:
    """The bytes as text, or None when they are binary."""
    data = fetched.data
    if b"\0" in data[:FIRST_BLOCK_BYTES]:
        return None
    if fetched.cut:  # the end of a longer file may start inside a UTF-8 character
        start = 0
        while start < min(3, len(data)) and 0x80 <= data[start] <= 0xBF:
            start += 1
        data = data[start:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    if fetched.cut:
        text = _from_a_whole_line(text)
    head = text[:FIRST_BLOCK_BYTES]
    controls = sum(1 for c in head if (ord(c) < 32 and c not in TEXT_CONTROLS) or 0x7F <= ord(c) < 0xA0)
    return text if controls <= MAX_CONTROL_SHARE * len(head) else None


def _from_a_whole_line(text: str) -> str:
    """The end of a file as downloaded, from its first whole line, and past a key block whose
    start was cut off: a secret cut in two is matched by no rule, so its tail is never shown."""
    text = text.partition("\n")[2]
    begin, end = text.find("-----BEGIN"), text.find("-----END")
    if end != -1 and (begin == -1 or end < begin):
        text = text[end:].partition("\n")[2]
    return text


def _entry(message: ThreadMessage, file: ThreadFile, read: _Read, limit: int) -> ThreadMessage:
    if read.text is None:
        text = NOT_READ.format(why=WHY[read.problem or "failed"])
    else:
        text = f"{FILE_CUT_NOTE.format(limit=limit)}\n{read.text}" if read.cut else read.text
    return ThreadMessage(message.author, text, attachment=file.name or "unnamed file")
