"""Snapshot files are opened for reading only when they are regular files: never a FIFO, a
socket or a device.

A snapshot holds folders and regular files written from git blobs; anything else in it was put
there from outside (a FIFO in place of a README), and opening it for reading could block
forever in the kernel (a FIFO without a writer) or act on a device. So the kind is checked
before opening (`stat`: a path is never opened to learn what it is), the open itself cannot
block (O_NONBLOCK; O_NOCTTY: a terminal never becomes ours), and the kind is checked again on
what was opened (`fstat`), in case the path changed in between.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a folder",
}


class NotRegularFile(OSError):
    """A path that is not a regular file was to be read; str() says what it is instead."""

    def __init__(self, mode: int) -> None:
        self.kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        super().__init__(f"not a regular file: {self.kind}")


def special_kind(path: Path) -> str | None:
    """What `path` is when it exists and is neither a regular file nor a folder ("a FIFO"), else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else NotRegularFile(mode).kind


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for reading in binary; NotRegularFile (never a block) when it is not a regular file."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegularFile(mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(mode)
        os.set_blocking(fd, True)  # a regular file after all: its reads behave as usual
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path) -> bytes:
    """The bytes of a regular file (see open_regular)."""
    with open_regular(path) as handle:
        return handle.read()
