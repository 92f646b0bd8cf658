"""What a commit's tree holds, read from git before anything is written: every entry with its
mode and size (`list_tree`), or, for a refresh, the previous commit's entries with the changes
between the two commits applied (`changed_tree`), so a two-file commit reads two entries from
git instead of the whole tree.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

SYMLINK, GITLINK = "120000", "160000"
_GONE = "000000"  # the mode `git diff-tree` gives the missing side of an added or deleted path


class TreeEntry(NamedTuple):  # a tuple: a build record of 100k entries loads in milliseconds
    path: str  # relative, "/"-separated; undecodable bytes kept as surrogates (os.fsdecode)
    mode: str  # 100644, 100755, 120000 (symlink) or 160000 (submodule)
    sha: str
    size: int  # bytes; 0 for a submodule


@dataclass(frozen=True)
class TreeChange:
    """The tree of a new commit as the previous one's plus what changed."""

    entries: list[TreeEntry]
    changed: set[str]  # paths added, removed or given another blob or mode
    added: set[str]  # paths the previous commit did not have, or had as another type (a link, a file)


def git(git_dir: Path, args: list[str], timeout: float, stdin: bytes | None = None) -> bytes:
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise OSError(f"git {args[0]} failed: {reason[-1] if reason else 'no message'}")
    return done.stdout


def list_tree(git_dir: Path, sha: str, timeout: float) -> list[TreeEntry]:
    """Every file, symlink and submodule of the commit, with sizes, before anything is read."""
    out = git(git_dir, ["ls-tree", "-r", "-l", "-z", "--full-tree", sha], timeout)
    entries = []
    for record in out.split(b"\0"):
        if not record:
            continue
        head, _, raw_path = record.partition(b"\t")
        mode, _kind, obj, size = head.split()
        entries.append(
            TreeEntry(os.fsdecode(raw_path), mode.decode(), obj.decode(), int(size) if size.isdigit() else 0)
        )
    return entries


def changed_tree(
    git_dir: Path, old: str, new: str, old_entries: list[TreeEntry], timeout: float
) -> TreeChange:
    """The entries of commit `new`, from those of commit `old` and `git diff-tree old new`:
    only the changed entries are read from git (their sizes in one `cat-file --batch-check`)."""
    out = git(git_dir, ["diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", old, new], timeout)
    tokens = out.split(b"\0")
    by_path = {entry.path: entry for entry in old_entries}
    updated: list[tuple[str, str, str]] = []  # (path, mode, sha) of the new side
    changed: set[str] = set()
    added: set[str] = set()
    for at in range(0, len(tokens) - 1, 2):
        head, raw_path = tokens[at], tokens[at + 1]
        if not head.startswith(b":"):
            raise OSError("git diff-tree gave output codebot cannot read")
        old_mode, new_mode, _old_sha, new_sha, _status = head[1:].decode("ascii").split()
        path = os.fsdecode(raw_path)
        changed.add(path)
        existed = by_path.pop(path, None) is not None
        if new_mode != _GONE:
            updated.append((path, new_mode, new_sha))
            if not existed or _kind(old_mode) != _kind(new_mode):
                added.add(path)
    sizes = _sizes(git_dir, sorted({sha for _, mode, sha in updated if mode != GITLINK}), timeout)
    for path, mode, sha in updated:
        by_path[path] = TreeEntry(path, mode, sha, 0 if mode == GITLINK else sizes[sha])
    return TreeChange(list(by_path.values()), changed, added)


def _kind(mode: str) -> str:
    return mode if mode in (SYMLINK, GITLINK, _GONE) else "file"  # 100755 and 100644 alike


def _sizes(git_dir: Path, shas: list[str], timeout: float) -> dict[str, int]:
    if not shas:
        return {}
    out = git(git_dir, ["cat-file", "--batch-check"], timeout, stdin="".join(f"{s}\n" for s in shas).encode())
    sizes: dict[str, int] = {}
    for line in out.decode("ascii").splitlines():
        sha, kind, size = line.split()
        if kind != "blob":
            raise OSError(f"git cat-file: {sha} is a {kind}, not a blob")
        sizes[sha] = int(size)
    return sizes


def read_small_blobs(git_dir: Path, shas: list[str], timeout: float) -> dict[str, bytes]:
    """The content of a few small blobs (symlink targets), in one `git cat-file --batch`."""
    if not shas:
        return {}
    out = git(git_dir, ["cat-file", "--batch"], timeout, stdin="".join(f"{s}\n" for s in shas).encode())
    found: dict[str, bytes] = {}
    at = 0
    for sha in shas:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        at = end + 1
        if len(header) == 3:
            size = int(header[2])
            found[sha] = out[at : at + size]
            at += size + 1
    return found
