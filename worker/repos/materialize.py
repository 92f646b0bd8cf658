"""Writing a snapshot's folder from the processed blob store.

Files are hardlinks to the store's processed objects (a copy when a link is impossible), empty
files, placeholders for oversized and withheld files, and the symlinks last, so that no link can
redirect where a file is written.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from config.settings import Settings
from worker.repos.blob_worker import object_file
from worker.repos.blobstore import BlobStore
from worker.repos.disk import human_bytes
from worker.repos.placeholders import OVERSIZED, WITHHELD, placeholder
from worker.repos.snapshot_plan import Plan
from worker.repos.visible import shown_name

log = logging.getLogger(__name__)


@dataclass
class MoveFrom:
    """Take the previous snapshot apart instead of linking every file anew (issue 22: a refresh
    costs what changed). Its unchanged folders are renamed into the new snapshot whole, and its
    unchanged files in changed folders one by one; only `changed` paths are written. A rename is
    O(1) whatever a folder holds, so a two-file commit costs its two files and the folders on
    their paths.

    `claim` returns the previous snapshot's folder only when no question reads it (its lease
    taken exclusively) and makes it unservable until `release`; otherwise None and the build
    links every file. `undo` puts every moved entry back (a build that fails after the moves)."""

    claim: Callable[[], Path | None]
    release: Callable[[], None] = lambda: None
    changed: set[str] = field(default_factory=set)  # paths whose entry differs from the previous snapshot's
    moved: list[tuple[str, str]] = field(default_factory=list)  # (from, to), in order

    def take_unchanged(self, previous: str, root: str) -> list[str]:
        """Move every unchanged folder and file (links excepted: they go last); the unchanged
        links' paths."""
        folders = {""}
        for path in self.changed:
            while "/" in path:
                path = path.rsplit("/", 1)[0]
                folders.add(path)
        links: list[str] = []
        for folder in sorted(folders):  # parents first
            try:
                children = list(os.scandir(f"{previous}/{folder}" if folder else previous))
            except (FileNotFoundError, NotADirectoryError):
                continue  # a folder the previous snapshot did not have
            for child in children:
                path = f"{folder}/{child.name}" if folder else child.name
                if path in folders or path in self.changed:
                    continue
                if child.is_symlink():
                    links.append(path)
                    continue
                self._move(child.path, f"{root}/{path}")
        return links

    def take_links(self, previous: str, root: str, links: list[str]) -> None:
        for path in links:
            self._move(f"{previous}/{path}", f"{root}/{path}")

    def _move(self, source: str, destination: str) -> None:
        parent = destination.rsplit("/", 1)[0]
        os.makedirs(parent, exist_ok=True)  # a changed folder: made here, never a moved one
        os.rename(source, destination)
        self.moved.append((source, destination))

    def undo(self) -> None:
        for source, destination in reversed(self.moved):
            with suppress(OSError):
                os.rename(destination, source)
        self.moved.clear()


def _link(source: str, destination: str) -> None:
    try:
        os.link(source, destination)
    except OSError as exc:
        if exc.errno not in (errno.EMLINK, errno.EXDEV, errno.EPERM, errno.ENOTSUP):
            raise
        shutil.copyfile(source, destination)  # too many links, or a file system without them


def materialize(
    root: Path,
    plan: Plan,
    targets: dict[str, str],
    store: BlobStore,
    settings: Settings,
    move: MoveFrom | None = None,
) -> set[str]:
    """Write the tree into `root`; the paths of files that could not be written.

    With `move`, the previous snapshot's unchanged folders and files are moved over when it may
    be taken apart (see MoveFrom), and only the changed paths are written."""
    previous = move.claim() if move is not None else None
    if move is None or previous is None:
        return _write(root, plan, targets, store, settings, None)
    try:
        links = move.take_unchanged(os.fspath(previous), os.fspath(root))
    except OSError as exc:  # undo, and write the whole tree as a full build does
        log.warning("reusing the previous snapshot's folders failed (%s); linking every file", exc)
        move.undo()
        move.release()
        return _write(root, plan, targets, store, settings, None)
    failed = _write(root, plan, targets, store, settings, move.changed)
    move.take_links(os.fspath(previous), os.fspath(root), links)  # last, as every link
    return failed


def _write(
    root: Path,
    plan: Plan,
    targets: dict[str, str],
    store: BlobStore,
    settings: Settings,
    only: set[str] | None,
) -> set[str]:
    """Write the plan's entries (those in `only`, when given) into `root`; the paths that failed."""
    # Plain strings, not Path objects: per file, pathlib's joins cost as much as the link itself.
    base = os.fspath(root)
    _make_folders(base, plan, only)
    failed = _write_files(base, os.fspath(store.objects), plan, only, settings)
    for entry, why in plan.withheld:
        if only is not None and entry.path not in only:
            continue
        try:
            Path(f"{base}/{entry.path}").write_bytes(placeholder(WITHHELD, entry.size, why))
        except OSError as exc:
            failed.add(entry.path)
            log.warning("could not write %r: %s", shown_name(entry.path), exc)
    for entry in plan.links:  # last: no link can redirect where a file above was written
        if only is not None and entry.path not in only:
            continue
        try:
            os.symlink(targets.get(entry.path, ""), f"{base}/{entry.path}")
        except OSError as exc:
            failed.add(entry.path)
            log.warning("could not make link %r: %s", shown_name(entry.path), exc)
    return failed


def _make_folders(base: str, plan: Plan, only: set[str] | None) -> None:
    """The folders the written entries go in, and the submodules' (empty) folders; one that
    cannot be made is logged, and what goes in it fails on its own."""
    written = [
        e
        for e in (*plan.files, *(entry for entry, _ in plan.withheld), *plan.links, *plan.submodules)
        if only is None or e.path in only
    ]
    folders = sorted({p.rsplit("/", 1)[0] for e in written if "/" in (p := e.path)})
    folders += [e.path for e in plan.submodules if only is None or e.path in only]
    for folder in folders:
        try:
            os.makedirs(f"{base}/{folder}", exist_ok=True)
        except OSError as exc:
            log.warning("could not make folder %r: %s", shown_name(folder), exc)


def _write_files(base: str, objects: str, plan: Plan, only: set[str] | None, settings: Settings) -> set[str]:
    """The plan's files: an empty file, a placeholder when over blob_max_bytes, else a link to the
    processed object; the paths that failed."""
    failed: set[str] = set()
    for entry in plan.files:
        if only is not None and entry.path not in only:
            continue
        destination = f"{base}/{entry.path}"
        try:
            if entry.size == 0:
                os.close(os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            elif entry.size > settings.blob_max_bytes:
                reason = f"larger than blob_max_bytes ({human_bytes(settings.blob_max_bytes)})"
                Path(destination).write_bytes(placeholder(OVERSIZED, entry.size, reason))
            else:
                _link(object_file(objects, entry.sha), destination)
        except OSError as exc:
            failed.add(entry.path)
            log.warning("could not write %r: %s", shown_name(entry.path), exc)
    return failed
