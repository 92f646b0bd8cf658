"""The lines one name is used on in one parsed file, packed into a few bytes for the blob store.

A reference row of the store (worker/repos/blobstore.py) is one (name, unit) pair and the lines
it is used on: a name is mostly used several times per file, so one row per line cost the store
several times the rows (and ~14 bytes each). The lines are sorted, deduplicated and stored as
deltas, each an unsigned LEB128 varint: low 7 bits first, the high bit set on every byte but a
number's last. Most deltas are below 128, one byte each, so a line costs about a byte, and
packing (a table of every small delta's bytes) and unpacking (`itertools.accumulate`) run in C
unless a delta is larger.
"""

from __future__ import annotations

from itertools import accumulate
from operator import itemgetter, sub

_CONTINUED = bytes(range(0x80, 0x100))  # a varint's bytes other than its last


def _varint(number: int) -> bytes:
    packed = bytearray()
    while number >= 0x80:
        packed.append(number & 0x7F | 0x80)
        number >>= 7
    packed.append(number)
    return bytes(packed)


# Every delta below this, packed once (~0.6 MB per process): a file's first line used is mostly
# past 127, so most names would otherwise take the byte loop above; with the table a name's lines
# are packed in C (`map`, `bytes.join`), one of the costs of indexing per identifier. A delta of 0
# (a line used twice) packs to nothing: no set to deduplicate the lines first.
_DELTAS = (b"", *(_varint(number) for number in range(1, 1 << 14)))


def pack_rows(rows: list[int]) -> bytes:
    """A name's lines as delta varints, in ascending order, from `rows`: -1 first, then the 0-based
    rows it is used on (any order, repeats allowed), as worker/repos/symbol_tree.py gathers them
    (the -1 makes the first delta the first 1-based line, with no +1 per identifier). Sorts `rows`
    in place."""
    if len(rows) == 2 and rows[1] < len(_DELTAS) - 1:
        return _DELTAS[rows[1] + 1]  # a name used on one line: most names of a file
    if len(rows) < 3:  # no line, or one line 16,384 or more (an itemgetter of one index is no tuple)
        return b"".join(_varint(row + 1) for row in rows[1:])
    rows.sort()
    following = iter(rows)
    next(following)
    try:  # one itemgetter of every delta: `map(_DELTAS.__getitem__, …)` packs an argument tuple per call
        return b"".join(itemgetter(*map(sub, following, rows))(_DELTAS))
    except IndexError:  # a delta of 16,384 lines or more
        return b"".join(_varint(delta) for delta in map(sub, rows[1:], rows) if delta)


def pack_lines(lines: list[int]) -> bytes:
    """The lines (1-based, any order, repeats allowed) as delta varints, in ascending order."""
    return pack_rows([-1, *(line - 1 for line in lines)])


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
