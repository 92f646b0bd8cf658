"""A blob processor process: `python -m worker.repos.blob_worker GIT_DIR OBJECTS_DIR MEMORY_BYTES`.

The pool (worker/repos/blob_pool.py) runs a few of these per sync, so that one hostile blob can
only ever cost its own bound: each process lives under an address-space limit (RLIMIT_AS, set
after its imports), and the pool kills it when one blob takes longer than its time bound.

It reads tasks from stdin and answers on stdout, each message a 4-byte big-endian length and a
pickle (both ends are our own code; the blobs themselves travel only between git and here):

- `{"op": "process", "sha", "grammars", "parse_max_bytes"}`: read the blob from the mirror
  (`git cat-file --batch`), process it (worker/repos/blob_process.py), write the result into
  the store's objects folder, answer `("stored", sha, kind, reason, lines, size)`; then parse
  the redacted text with each grammar asked for and answer `("parsed", sha, units)`;
- `{"op": "parse", "sha", "grammars"}`: parse an already processed blob; answer `("parsed", …)`.

A failure the process survives (out of memory, a parser error) is answered as
`("failed", sha, stage, reason)`. The first message, once imports are done, is `("ready",)`.
"""

from __future__ import annotations

import functools
import os
import pickle
import resource
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

HEADER = struct.Struct(">I")


def write_message(stream: IO[bytes], message: Any) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(payload)) + payload)
    stream.flush()


def read_message(stream: IO[bytes]) -> Any | None:
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (length,) = HEADER.unpack(head)
    return pickle.loads(stream.read(length))


def object_path(objects: Path, sha: str) -> Path:
    return Path(object_file(os.fspath(objects), sha))


def object_file(objects: str, sha: str) -> str:
    """The same path as a string: for loops over every file of a snapshot, where pathlib's
    joins cost as much as the link or stat itself."""
    return f"{objects}/{sha[:2]}/{sha}"


def store_object(objects: Path, sha: str, data: bytes) -> None:
    """Write a processed blob read-only and atomically (a reader never sees half of one)."""
    path = object_path(objects, sha)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{sha}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o444)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class _CatFile:
    """One `git cat-file --batch` for the whole life of the process."""

    def __init__(self, git_dir: str) -> None:
        self.proc = subprocess.Popen(
            ["git", "--git-dir", git_dir, "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )

    def read(self, sha: str) -> bytes | None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(sha.encode() + b"\n")
        self.proc.stdin.flush()
        header = self.proc.stdout.readline().split()
        if len(header) != 3 or header[1] != b"blob":
            return None
        size = int(header[2])
        data = self.proc.stdout.read(size)
        self.proc.stdout.read(1)  # the newline after the content
        return data


@functools.cache
def _parsers() -> tuple[Callable[[str, bytes], Any], Callable[[list[int]], bytes]]:
    """The parse and the packing, imported on first use (the pool imports this module without
    the grammars) and then kept: an import statement per blob cost ~14,000 instructions, as much
    as the rest of a small file's fixed costs."""
    from worker.repos.ref_lines import pack_rows
    from worker.repos.symbol_grammars import parse_source

    return parse_source, pack_rows


def _parse(data: bytes, grammars: list[str]) -> dict[str, tuple[str, str, list[Any], dict[str, bytes]]]:
    parse_source, pack_rows = _parsers()
    units = {}
    for grammar in grammars:
        symbols = parse_source(grammar, data)
        definitions = symbols.found
        # Packed here, in the pool's processes: the store's writer only inserts the rows.
        references = {name: pack_rows(rows) for name, rows in symbols.rows.items()}
        units[grammar] = (symbols.language, symbols.family, definitions, references)
    return units


def _failure(exc: BaseException, memory_bytes: int) -> str:
    if isinstance(exc, MemoryError):
        return f"processing it needed more than {memory_bytes // (1 << 20)} MB of memory"
    return f"it could not be processed ({type(exc).__name__})"


def serve(git_dir: str, objects: Path, memory_bytes: int, tasks: IO[bytes], answers: IO[bytes]) -> None:
    from worker.repos.blob_process import process_blob
    from worker.repos.placeholders import TEXT
    from worker.repos.secrets.redaction import get_redactor
    from worker.repos.symbol_grammars import GRAMMARS

    redactor = get_redactor()
    assert GRAMMARS  # imported (and the grammars loaded) before the memory limit is set
    cat_file = _CatFile(git_dir)
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    write_message(answers, ("ready",))  # the pool starts a blob's clock only now
    while (task := read_message(tasks)) is not None:
        sha, grammars = task["sha"], list(task.get("grammars") or [])
        stage = "stored"
        try:
            if task["op"] == "process":
                raw = cat_file.read(sha)
                if raw is None:
                    write_message(answers, ("failed", sha, stage, "the blob is missing from the mirror"))
                    continue
                processed = process_blob(raw, redactor)
                del raw
                store_object(objects, sha, processed.data)
                write_message(answers, ("stored", sha, processed.kind, processed.reason, processed.lines, 0))
                data = processed.data
                if processed.kind != TEXT or len(data) > int(task.get("parse_max_bytes", 0)):
                    grammars = []
            else:
                data = object_path(objects, sha).read_bytes()
            stage = "parsed"
            write_message(answers, ("parsed", sha, _parse(data, grammars) if grammars else {}))
        except (MemoryError, RecursionError, ValueError, OSError, UnicodeError) as exc:
            write_message(answers, ("failed", sha, stage, _failure(exc, memory_bytes)))


def main() -> None:
    git_dir, objects, memory = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    serve(git_dir, objects, memory, sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
