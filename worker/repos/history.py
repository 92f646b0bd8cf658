"""What git says about history, parsed: commits, log records and blame.

The history tools (worker/tools/history.py) never show git's own text of a file: diffs are
parsed in worker/repos/diff_parse.py and filled with file versions processed exactly as a
snapshot's files are (worker/repos/history_content.py), which also keeps the list of blobs that
were secret files. Secret file names (worker/repos/visible.py) are the caller's to hide.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field

from worker.repos.git_objects import ObjectReader
from worker.repos.git_read import GitReadError

ZERO_SHA = "0" * 40
SYMLINK, GITLINK = "120000", "160000"
SHA = re.compile(r"^[0-9a-f]{40}$")
_IDENT = re.compile(rb"^(?P<name>.*?) <(?P<email>[^<>]*)> (?P<time>\d{1,12}) (?P<tz>[+-]\d{4})$")
_BLAME_HEADER = re.compile(r"^([0-9a-f]{40}) (\d+) (\d+)(?: (\d+))?$")


# --- commits -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Person:
    name: str
    email: str
    time: int  # unix seconds
    tz: str  # "+0200"


@dataclass(frozen=True)
class Commit:
    sha: str
    tree: str
    parents: tuple[str, ...]
    author: Person
    committer: Person
    message: str  # as committed (not redacted: the caller redacts what it shows)

    @property
    def subject(self) -> str:
        return " ".join(self.message.strip().split("\n\n", 1)[0].split()) if self.message.strip() else ""


def _person(raw: bytes) -> Person:
    match = _IDENT.match(raw.strip())
    if match is None:
        return Person(raw.decode("utf-8", "replace")[:200], "", 0, "+0000")
    return Person(
        match.group("name").decode("utf-8", "replace"),
        match.group("email").decode("utf-8", "replace"),
        int(match.group("time")),
        match.group("tz").decode(),
    )


def decode_message(raw: bytes, encoding: str) -> str:
    """A commit message decoded with the encoding its commit declares (UTF-8 when none, or one
    Python does not know); a UTF-16 message would otherwise show a token with a NUL between
    each character, which no redaction rule matches."""
    name = encoding.strip() or "utf-8"
    try:
        codecs.lookup(name)
    except LookupError:
        name = "utf-8"
    try:
        return raw.decode(name, "replace")
    except (UnicodeError, ValueError):
        return raw.decode("utf-8", "replace")


def parse_commit(sha: str, data: bytes) -> Commit:
    """A raw commit object (`git cat-file commit`): its headers, then a blank line, then its message."""
    head, _, message = data.partition(b"\n\n")
    tree, parents, encoding = "", [], ""
    people: dict[bytes, Person] = {}
    for line in head.split(b"\n"):
        if line.startswith(b" "):
            continue  # a continuation (gpgsig, mergetag)
        key, _, value = line.partition(b" ")
        if key == b"tree":
            tree = value.decode("ascii", "replace")
        elif key == b"parent":
            parents.append(value.decode("ascii", "replace"))
        elif key in (b"author", b"committer"):
            people[key] = _person(value)
        elif key == b"encoding":
            encoding = value.decode("ascii", "replace")
    unknown = Person("unknown", "", 0, "+0000")
    return Commit(
        sha,
        tree,
        tuple(parents),
        people.get(b"author", unknown),
        people.get(b"committer", unknown),
        decode_message(message, encoding),
    )


def read_commit(reader: ObjectReader, rev: str, max_bytes: int) -> Commit | None:
    """The commit `rev` names in the mirror (a sha, an abbreviation, a tag or branch), or None."""
    found = reader.lookup(f"{rev}^{{commit}}", max_bytes)
    if found is None or found.kind != "commit":
        return None
    if found.data is None:
        raise GitReadError(f"commit {found.sha[:10]} is larger than {max_bytes:,} bytes; not read")
    return parse_commit(found.sha, found.data)


# --- log records -------------------------------------------------------------------------------

# %e: the encoding a commit declares; git cannot re-encode a UTF-16 message for %B (it stops at
# the first NUL), so such a message is read from the commit object instead (LogParser's reader).
LOG_FORMAT = "--format=%x1e%H%x1f%P%x1f%ct%x1f%at%x1f%an%x1f%ae%x1f%e%x1f%B"


@dataclass
class RawEntry:
    """One file of a commit's or a range's diff, as `git diff --raw -z` lists it."""

    old_mode: str
    new_mode: str
    old_sha: str
    new_sha: str
    status: str  # A, D, M, T, R<score>, C<score>
    old_path: str
    new_path: str
    added: int | None = None  # lines, from --numstat; None for a binary file
    deleted: int | None = None


@dataclass
class LogRecord:
    sha: str
    parents: tuple[str, ...]
    committed: int
    authored: int
    author: str
    email: str
    message: str
    entries: list[RawEntry] = field(default_factory=list)

    @property
    def subject(self) -> str:
        return " ".join(self.message.strip().split("\n\n", 1)[0].split())


def path_text(raw: bytes) -> str:
    """A path as git printed it, as text that gives the same bytes back (surrogateescape)."""
    return raw.decode("utf-8", "surrogateescape")


class LogParser:
    """Parses `git log -z --raw LOG_FORMAT` output fed in chunks; `records()` yields complete commits.

    Fields are split by NUL and \\x1f, the message last, so nothing a commit message or a file
    name holds can start a record of its own."""

    def __init__(self, reader: ObjectReader | None = None) -> None:
        self._reader = reader  # reads the message of a commit declaring an encoding other than UTF-8
        self._pending = b""
        self._current: LogRecord | None = None
        self._raw: list[bytes] | None = None  # a raw entry's fields while its paths are read
        self._done: list[LogRecord] = []

    def feed(self, chunk: bytes) -> list[LogRecord]:
        tokens = (self._pending + chunk).split(b"\0")
        self._pending = tokens.pop()
        for token in tokens:
            self._token(token)
        done, self._done = self._done, []
        return done

    def close(self) -> list[LogRecord]:
        if self._pending:
            self._token(self._pending)
            self._pending = b""
        if self._current is not None:
            self._done.append(self._current)
            self._current = None
        done, self._done = self._done, []
        return done

    def _token(self, token: bytes) -> None:
        if self._raw is not None:  # a path of the raw entry being read
            self._raw.append(token)
            status = self._raw[0].split()[-1] if self._raw[0].split() else b""
            if len(self._raw) == (3 if status[:1] in (b"R", b"C") else 2):
                self._add_entry(self._raw)
                self._raw = None
            return
        stripped = token.lstrip(b"\n")
        if stripped.startswith(b"\x1e"):
            if self._current is not None:
                self._done.append(self._current)
            self._current = _log_record(stripped[1:], self._reader)
        elif stripped.startswith(b":"):
            self._raw = [stripped]  # its paths are read even for a record we could not use

    def _add_entry(self, fields: list[bytes]) -> None:
        head = fields[0][1:].split()
        if len(head) != 5 or self._current is None:
            return
        old_path = path_text(fields[1])
        new_path = path_text(fields[2]) if len(fields) == 3 else old_path
        self._current.entries.append(
            RawEntry(head[0].decode(), head[1].decode(), head[2].decode(), head[3].decode(), head[4].decode(),
                     old_path, new_path)
        )  # fmt: skip


def _log_record(header: bytes, reader: ObjectReader | None) -> LogRecord | None:
    fields = header.split(b"\x1f", 7)
    if len(fields) != 8 or not SHA.match(fields[0].decode("ascii", "replace")):
        return None
    sha, parents, committed, authored, name, email, encoding, message = fields
    if encoding.strip().lower() not in (b"", b"utf-8", b"utf8"):
        try:
            commit = read_commit(reader, sha.decode(), 4 << 20) if reader is not None else None
        except GitReadError:
            commit = None
        message = commit.message.encode() if commit is not None else b""
    return LogRecord(
        sha.decode(),
        tuple(p for p in parents.decode("ascii", "replace").split() if SHA.match(p)),
        int(committed) if committed.isdigit() else 0,
        int(authored) if authored.isdigit() else 0,
        name.decode("utf-8", "replace"),
        email.decode("utf-8", "replace"),
        message.decode("utf-8", "replace"),
    )


# --- blame -------------------------------------------------------------------------------------


@dataclass
class BlameLine:
    sha: str
    original_line: int
    final_line: int


@dataclass
class Blame:
    lines: list[BlameLine]
    commits: dict[
        str, dict[str, str]
    ]  # sha -> porcelain keys: author, author-mail, author-time, summary, boundary


def parse_blame(data: bytes) -> Blame:
    """`git blame --porcelain` output; the file's text lines in it (after a tab) are ignored."""
    blame = Blame([], {})
    current: dict[str, str] | None = None
    for raw in data.split(b"\n"):
        if raw.startswith(b"\t") or not raw:
            continue
        line = raw.decode("utf-8", "replace")
        if header := _BLAME_HEADER.match(line):
            sha = header.group(1)
            blame.lines.append(BlameLine(sha, int(header.group(2)), int(header.group(3))))
            current = blame.commits.setdefault(sha, {})
        elif current is not None:
            key, _, value = line.partition(" ")
            current.setdefault(key, value)
    return blame


def blame_args(sha: str, path: str, start: int, end: int) -> list[str]:
    return ["blame", "--porcelain", "-L", f"{start},{end}", sha, "--", path]
