"""The lines one name is used on in one parsed file, packed into a few bytes for the blob store.

A reference row of the store (worker/repos/blobstore.py) is one (name, unit) pair and the lines
it is used on: a name is mostly used several times per file, so one row per line cost the store
several times the rows (and ~14 bytes each). The lines are sorted, deduplicated and stored as
deltas, each an unsigned LEB128 varint: low 7 bits first, the high bit set on every byte but a
number's last. Most deltas are below 128, one byte each, so a line costs about a byte, and
packing and unpacking run in C (`bytes()`, `itertools.accumulate`) unless a delta is larger.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import accumulate

_CONTINUED = bytes(range(0x80, 0x100))  # a varint's bytes other than its last


def pack_lines(lines: Iterable[int]) -> bytes:
    """The lines (1-based, any order, repeats allowed) as delta varints, in ascending order."""
    ordered = sorted(set(lines))
    deltas = [line - before for line, before in zip(ordered, [0, *ordered], strict=False)]
    if not deltas or max(deltas) < 0x80:
        return bytes(deltas)
    packed = bytearray()
    for delta in deltas:
        while delta >= 0x80:
            packed.append(delta & 0x7F | 0x80)
            delta >>= 7
        packed.append(delta)
    return bytes(packed)


def unpack_lines(packed: bytes) -> list[int]:
    """The ascending lines `pack_lines` packed."""
    if not packed or max(packed) < 0x80:
        return list(accumulate(packed))
    lines: list[int] = []
    line = delta = shift = 0
    for byte in packed:
        delta |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
            continue
        line += delta
        lines.append(line)
        delta = shift = 0
    return lines


def count_lines(packed: bytes) -> int:
    """How many lines `packed` holds, without unpacking them (one varint ends per low byte)."""
    return len(packed.translate(None, _CONTINUED))


def group_references(references: Iterable[tuple[str, int]]) -> dict[str, bytes]:
    """(name, line) pairs as {name: its packed lines}: one store row per name of a file."""
    by_name: dict[str, list[int]] = {}
    for name, line in references:
        by_name.setdefault(name, []).append(line)
    return {name: pack_lines(lines) for name, lines in by_name.items()}
