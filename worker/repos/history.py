"""What git says about history, parsed: commits, log records, blame, and diffs over processed content.

The history tools (worker/tools/history.py) never show git's own text of a file. A diff is built
from git's patch *structure* (which lines were added, removed or kept, by number) filled with the
lines of each file version **processed** exactly as a snapshot's files are
(worker/repos/blob_process.py): the whole version is redacted, so a secret spread over lines (a
private key) is redacted even in a hunk that shows only its middle, and a version withheld by
content (a credentials file) or binary is never shown. Line counts are kept by processing, so
git's line numbers hold. Secret file names (worker/repos/visible.py) are the caller's to hide.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from config.settings import Settings
from worker.repos.blob_process import process_blob
from worker.repos.git_read import GitObject, GitProcess, GitReadError, ObjectReader
from worker.repos.placeholders import OVERSIZED, TEXT, WITHHELD
from worker.repos.redaction import get_redactor
from worker.repos.visible import secret_path

log = logging.getLogger(__name__)

ZERO_SHA = "0" * 40
# In each mirror: every blob stored under a secret file name anywhere in its history (kept by
# the mirrors at each sync). Such a blob is never shown, whatever name it has in another commit.
SECRET_BLOBS_FILE = "codebot-secret-blobs"
SYMLINK, GITLINK = "120000", "160000"
_SHA = re.compile(r"^[0-9a-f]{40}$")
_IDENT = re.compile(rb"^(?P<name>.*?) <(?P<email>[^<>]*)> (?P<time>\d{1,12}) (?P<tz>[+-]\d{4})$")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_INDEX = re.compile(r"^index ([0-9a-f]{40})\.\.([0-9a-f]{40})")
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


def parse_commit(sha: str, data: bytes) -> Commit:
    """A raw commit object (`git cat-file commit`): its headers, then a blank line, then its message."""
    head, _, message = data.partition(b"\n\n")
    tree, parents = "", []
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
    unknown = Person("unknown", "", 0, "+0000")
    return Commit(
        sha,
        tree,
        tuple(parents),
        people.get(b"author", unknown),
        people.get(b"committer", unknown),
        message.decode("utf-8", "replace"),
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

LOG_FORMAT = "--format=%x1e%H%x1f%P%x1f%ct%x1f%at%x1f%an%x1f%ae%x1f%B"


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


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


class LogParser:
    """Parses `git log -z --raw LOG_FORMAT` output fed in chunks; `records()` yields complete commits.

    Fields are split by NUL and \\x1f, the message last, so nothing a commit message or a file
    name holds can start a record of its own."""

    def __init__(self) -> None:
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
            self._current = _log_record(stripped[1:])
        elif stripped.startswith(b":"):
            self._raw = [stripped]  # its paths are read even for a record we could not use

    def _add_entry(self, fields: list[bytes]) -> None:
        head = fields[0][1:].split()
        if len(head) != 5 or self._current is None:
            return
        old_path = _text(fields[1])
        new_path = _text(fields[2]) if len(fields) == 3 else old_path
        self._current.entries.append(
            RawEntry(head[0].decode(), head[1].decode(), head[2].decode(), head[3].decode(), head[4].decode(),
                     old_path, new_path)
        )  # fmt: skip


def _log_record(header: bytes) -> LogRecord | None:
    fields = header.split(b"\x1f", 6)
    if len(fields) != 7 or not _SHA.match(fields[0].decode("ascii", "replace")):
        return None
    sha, parents, committed, authored, name, email, message = fields
    return LogRecord(
        sha.decode(),
        tuple(p for p in parents.decode("ascii", "replace").split() if _SHA.match(p)),
        int(committed) if committed.isdigit() else 0,
        int(authored) if authored.isdigit() else 0,
        name.decode("utf-8", "replace"),
        email.decode("utf-8", "replace"),
        message.decode("utf-8", "replace"),
    )


# --- diffs -------------------------------------------------------------------------------------


@dataclass
class Hunk:
    old_start: int
    new_start: int
    lines: list[tuple[str, int | None, int | None]]  # (" ", "+", "-" or "\\", old number, new number)


@dataclass
class Section:
    """One file's part of a patch: its blob shas (from `index`), whether git found it binary, hunks."""

    old_sha: str | None
    new_sha: str | None
    binary: bool
    hunks: list[Hunk]


@dataclass
class ParsedDiff:
    entries: list[RawEntry]
    sections: list[Section | None]  # per entry: its section, or None when it has none or it was cut
    cut: bool  # git's output was capped: later sections are missing


def parse_diff(data: bytes, cut: bool) -> ParsedDiff:
    """`git diff-tree -r -z --raw --numstat -p --full-index --no-abbrev` output, in that order."""
    entries, at = _raw_entries(data)
    at = _numstat(data, at, entries)
    if data[at : at + 1] == b"\0":
        at += 1
    sections = _sections(data[at:].decode("utf-8", "replace"))
    return ParsedDiff(entries, _match_sections(entries, sections), cut)


def _next_token(data: bytes, at: int) -> tuple[bytes | None, int]:
    end = data.find(b"\0", at)
    return (None, at) if end < 0 else (data[at:end], end + 1)


def _raw_entries(data: bytes) -> tuple[list[RawEntry], int]:
    entries: list[RawEntry] = []
    at = 0
    while data[at : at + 1] == b":":
        head_token, after = _next_token(data, at)
        head = head_token[1:].split() if head_token else []
        if len(head) != 5:
            break
        status = head[4].decode()
        paths: list[str] = []
        for _ in range(2 if status[:1] in ("R", "C") else 1):
            path, after = _next_token(data, after)
            if path is None:
                return entries, len(data)
            paths.append(_text(path))
        entries.append(
            RawEntry(head[0].decode(), head[1].decode(), head[2].decode(), head[3].decode(), status, paths[0],
                     paths[-1])
        )  # fmt: skip
        at = after
    return entries, at


def _numstat(data: bytes, at: int, entries: list[RawEntry]) -> int:
    for entry in entries:
        token, after = _next_token(data, at)
        if token is None:
            return len(data)
        counts = token.split(b"\t")
        if len(counts) < 3:
            return at
        if counts[0].isdigit() and counts[1].isdigit():
            entry.added, entry.deleted = int(counts[0]), int(counts[1])
        at = after
        if counts[2] == b"":  # a rename: the two paths follow as tokens of their own
            for _ in range(2):
                _, at = _next_token(data, at)
    return at


def _sections(patch: str) -> list[Section]:
    sections: list[Section] = []
    current: Section | None = None
    hunk: Hunk | None = None
    old = new = 0
    for line in patch.split("\n"):
        if line.startswith("diff --git "):
            current = Section(None, None, False, [])
            sections.append(current)
            hunk = None
        elif current is None:
            continue
        elif hunk is None or line[:1] not in (" ", "+", "-", "\\"):
            if match := _HUNK.match(line):
                old, new = int(match.group(1)), int(match.group(3))
                hunk = Hunk(old, new, [])
                current.hunks.append(hunk)
            elif hunk is None and (index := _INDEX.match(line)):
                current.old_sha, current.new_sha = index.group(1), index.group(2)
            elif hunk is None and line.startswith("Binary files "):
                current.binary = True
        elif line.startswith(" "):
            hunk.lines.append((" ", old, new))
            old, new = old + 1, new + 1
        elif line.startswith("-"):
            hunk.lines.append(("-", old, None))
            old += 1
        elif line.startswith("+"):
            hunk.lines.append(("+", None, new))
            new += 1
        else:
            hunk.lines.append(("\\", None, None))
    return sections


def _match_sections(entries: list[RawEntry], sections: list[Section]) -> list[Section | None]:
    """Each entry's section, in order (a type change has two: the old kind removed, the new added).

    A section whose blob shas are not the entry's ends the matching: the entries from there on
    get none (their diff is not shown rather than shown against the wrong file)."""
    matched: list[Section | None] = []
    queue = list(sections)
    for entry in entries:
        if not queue:
            matched.append(None)
            continue
        if entry.status == "T" and len(queue) >= 2:
            removed, added = queue.pop(0), queue.pop(0)
            ok = removed.old_sha in (None, entry.old_sha) and added.new_sha in (None, entry.new_sha)
            matched.append(Section(entry.old_sha, entry.new_sha, removed.binary or added.binary,
                                   [*removed.hunks, *added.hunks]) if ok else None)  # fmt: skip
        else:
            section = queue.pop(0)
            ok = section.old_sha in (None, entry.old_sha) and section.new_sha in (None, entry.new_sha)
            matched.append(section if ok else None)
        if matched[-1] is None:
            matched.extend(None for _ in range(len(entries) - len(matched)))
            break
    return matched


def diff_args(base: str | None, target: str, path: str | None) -> list[str]:
    """`git diff-tree` arguments for the changes from `base` (None: the empty tree) to `target`."""
    args = ["diff-tree", "-r", "-z", "--raw", "--numstat", "-p", "--full-index", "--no-abbrev", "-M",
            "--no-color", "--no-ext-diff", "--no-textconv", "-U3"]  # fmt: skip
    args += ["--root", "--no-commit-id", target] if base is None else [base, target]
    return [*args, "--", path] if path else args


# --- file versions, processed ------------------------------------------------------------------


@dataclass(frozen=True)
class Version:
    """One blob as a snapshot would hold it: redacted text lines, or why it is not shown."""

    kind: str  # text, binary, withheld, oversized, or missing (not in the mirror)
    size: int
    lines: tuple[str, ...] = ()
    reason: str | None = None


_EMPTY = Version(TEXT, 0)
_cache: OrderedDict[str, Version] = OrderedDict()
_cache_lock = threading.Lock()
_CACHE_MAX_BYTES = 32 << 20
_cache_bytes = [0]


def processed_versions(reader: ObjectReader, shas: Iterable[str], settings: Settings) -> dict[str, Version]:
    """Blobs (full shas) processed as for a snapshot, read from the mirror together; cached by sha.

    A blob that was a secret file in any commit of the mirror is withheld in every commit."""
    versions: dict[str, Version] = {}
    secret = secret_blobs(reader.git_dir)
    unread: list[str] = []
    for sha in dict.fromkeys(shas):
        if sha == ZERO_SHA:
            versions[sha] = _EMPTY
        elif sha in secret:
            versions[sha] = Version(WITHHELD, 0, reason="it is a secret file (by its name) in another commit")
        else:
            with _cache_lock:
                cached = _cache.get(sha)
                if cached is not None:
                    _cache.move_to_end(sha)
                    versions[sha] = cached
                else:
                    unread.append(sha)
    if not unread:
        return versions
    for sha, found in reader.lookup_many(unread, settings.history_diff_max_file_bytes).items():
        version = _processed(found)
        versions[sha] = version
        with _cache_lock:
            _cache[sha] = version
            _cache_bytes[0] += version.size
            while _cache_bytes[0] > _CACHE_MAX_BYTES and len(_cache) > 1:
                _, dropped = _cache.popitem(last=False)
                _cache_bytes[0] -= dropped.size
    return versions


def _processed(found: GitObject | None) -> Version:
    if found is None or found.kind != "blob":
        return Version("missing", 0)
    if found.data is None:
        return Version(OVERSIZED, found.size, reason="larger than history_diff_max_file_bytes")
    processed = process_blob(found.data, get_redactor())
    if processed.kind != TEXT:
        return Version(processed.kind, found.size, reason=processed.reason)
    text = processed.data.decode("utf-8", "replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if "\r" in text:  # rare: only then is each line looked at
        lines = [line.removesuffix("\r") for line in lines]
    return Version(TEXT, found.size, tuple(lines))


def link_target(reader: ObjectReader, sha: str) -> str | None:
    """A symlink blob's target (small by nature), or None."""
    if sha == ZERO_SHA:
        return None
    found = reader.lookup(sha, 4096)
    return None if found is None or found.data is None else found.data.decode("utf-8", "surrogateescape")


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


# --- blobs that were secret files --------------------------------------------------------------


def secret_blobs(git_dir: Path) -> frozenset[str]:
    """The blobs recorded in the mirror's SECRET_BLOBS_FILE (empty when there is none)."""
    try:
        stamp = (git_dir / SECRET_BLOBS_FILE).stat().st_mtime_ns
    except OSError:
        return frozenset()
    return _read_secret_blobs(git_dir, stamp)[1]


@functools.lru_cache(maxsize=16)
def _read_secret_blobs(git_dir: Path, stamp: int) -> tuple[str, frozenset[str]]:
    """(what was scanned: "<tip> <depth>", the blob shas), read once per version of the file."""
    try:
        lines = (git_dir / SECRET_BLOBS_FILE).read_text(encoding="ascii").split("\n")
    except (OSError, UnicodeDecodeError):
        return "", frozenset()
    return lines[0], frozenset(line for line in lines[1:] if _SHA.match(line))


def record_secret_blobs(git_dir: Path, tip: str, depth: str, timeout: float, settings: Settings) -> int:
    """Update SECRET_BLOBS_FILE for a mirror whose branch is now at `tip`, fetched to `depth`.

    Only the new commits are scanned when the last scan was of an ancestor of `tip` at the same
    depth; otherwise the whole history is. Runs under the mirror's refresh lock."""
    path = git_dir / SECRET_BLOBS_FILE
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        stamp = 0
    scanned, known = _read_secret_blobs(git_dir, stamp) if stamp else ("", frozenset())
    old_tip, _, old_depth = scanned.partition(" ")
    if old_tip == tip and old_depth == depth:
        return len(known)
    incremental = bool(old_tip) and old_depth == depth and _is_ancestor(git_dir, old_tip, tip, timeout)
    revs = [tip, f"^{old_tip}"] if incremental else ["--all"]
    found = set(known) if incremental else set()
    args = ["log", "--raw", "--no-renames", "--no-abbrev", "-m", "-z", "--format=%x1e", *revs]
    with GitProcess(git_dir, args, timeout, 1 << 40) as proc:
        found.update(_secret_entries(proc.chunks(), settings))
        proc.finish()
    tmp = path.with_name(f".{SECRET_BLOBS_FILE}.{os.getpid()}.tmp")
    tmp.write_text("\n".join([f"{tip} {depth}", *sorted(found)]) + "\n", encoding="ascii")
    os.replace(tmp, path)
    return len(found)


def _is_ancestor(git_dir: Path, old: str, new: str, timeout: float) -> bool:
    if not _SHA.match(old):
        return False
    try:
        with GitProcess(git_dir, ["merge-base", "--is-ancestor", old, new], timeout, 1000) as proc:
            list(proc.chunks())
            proc.finish()
    except GitReadError:
        return False  # not an ancestor (exit 1), or gone (a force push, a trim): scan it all
    return True


def _secret_entries(chunks: Iterable[bytes], settings: Settings) -> set[str]:
    """Blob shas of the raw entries (`--raw --no-renames -z`) whose path is a secret file name."""
    found: set[str] = set()
    pending = b""
    head: list[bytes] | None = None
    for chunk in chunks:
        tokens = (pending + chunk).split(b"\0")
        pending = tokens.pop()
        for token in tokens:
            if head is not None:  # the path of the entry whose head came before
                if secret_path(os.fsdecode(token), settings) is not None:
                    found.update(sha.decode() for sha in head[2:4] if sha.decode() != ZERO_SHA)
                head = None
            elif token.lstrip(b"\n").startswith(b":"):
                head = token.lstrip(b"\n")[1:].split()
    return found
