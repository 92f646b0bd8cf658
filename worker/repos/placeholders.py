"""The placeholder a snapshot holds instead of a file's content (binary, oversized, withheld).

A placeholder starts with a NUL byte, so ripgrep skips it as binary and `read_file` recognises
it: `\\0codebot:<kind>:<original size>:<reason>\\n`. Only the blob processor and the snapshot
builder write files into a snapshot, and a text blob never contains NUL, so every snapshot file
starting with NUL is a placeholder.
"""

from __future__ import annotations

from dataclasses import dataclass

PLACEHOLDER_MAGIC = b"\x00codebot:"
PLACEHOLDER_MAX_BYTES = 512
BINARY = "binary"
WITHHELD = "withheld"
OVERSIZED = "oversized"
TEXT = "text"


@dataclass(frozen=True)
class Placeholder:
    kind: str  # binary, withheld or oversized
    size: int  # the original blob's size in bytes
    reason: str


def placeholder(kind: str, size: int, reason: str = "") -> bytes:
    clean = " ".join(reason.split())[:300].replace(":", ";") if reason else ""
    return PLACEHOLDER_MAGIC + f"{kind}:{size}:{clean}\n".encode()


def read_placeholder(head: bytes) -> Placeholder | None:
    """The placeholder in the first bytes of a snapshot file, or None for ordinary content."""
    if not head.startswith(PLACEHOLDER_MAGIC):
        return None
    fields = head[len(PLACEHOLDER_MAGIC) :].split(b"\n", 1)[0].decode("utf-8", "replace").split(":", 2)
    if len(fields) != 3 or not fields[1].isdigit():
        return Placeholder(WITHHELD, 0, "")
    return Placeholder(fields[0], int(fields[1]), fields[2])
