"""A spare copy of the served snapshot, for the next refresh to take apart when questions are
reading the served one.

A refresh costs what changed when it may take the previous snapshot apart (worker/repos/
materialize.py); while a question reads that snapshot it must stay whole, and the new one would
have to link every file. So after each refresh, off the critical path, the worker's background
cleaner links a spare copy of the new snapshot (`snapshots/.spare-<sha>`: the same hardlinks to
the same store objects, under a lease so that it copies a whole snapshot). The next refresh takes
the spare apart instead, and its cost no longer depends on whether anyone is reading.

A spare costs what one more snapshot's directories cost (a few MB per 10,000 files). Only a
long-lived worker keeps one (`codebot repos sync` does not). It carries its snapshot's blob list,
so removing it frees exactly what it alone held.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

from worker.repos.locks import BLOB_LIST_SUFFIX, SnapshotFolder, TakeApart, lock_shared_if_present

log = logging.getLogger(__name__)

SPARE_PREFIX = ".spare-"
BUILDING_PREFIX = ".building-spare-"  # <sha>-<pid>-<thread>: a spare being linked
TAKING_PREFIX = ".taking-"  # a spare a build is taking apart


def spare_path(folder: SnapshotFolder, sha: str) -> Path:
    return folder.path / f"{SPARE_PREFIX}{sha}"


def build_spare(folder: SnapshotFolder, sha: str) -> None:
    """Link a spare copy of snapshot `sha`, unless there is one (or the snapshot is gone)."""
    final = spare_path(folder, sha)
    if final.exists():
        return
    fd = lock_shared_if_present(folder.lease_file(sha))  # no refresh may take it apart meanwhile
    if fd is None:
        return
    tmp = folder.path / f"{BUILDING_PREFIX}{sha}-{os.getpid()}-{threading.get_ident()}"
    try:
        if not folder.files(sha).is_dir():
            return
        _link_tree(os.fspath(folder.files(sha)), os.fspath(tmp))
        listed = folder.blob_list(sha)
        if listed.exists():
            shutil.copyfile(listed, final.with_name(final.name + BLOB_LIST_SUFFIX))
        os.rename(tmp, final)
    except OSError as exc:
        log.warning("could not make a spare of snapshot %s: %s", sha, exc)
    finally:
        os.close(fd)
        shutil.rmtree(tmp, ignore_errors=True)


def _link_tree(source: str, destination: str) -> None:
    """Hardlinks only, unlike a build (materialize._link copies when a link is impossible): a
    spare that would copy content is not worth its disk, and without one a refresh links anew."""
    links: list[tuple[str, str]] = []
    for folder, dirs, files in os.walk(source):
        target = destination + folder[len(source) :]
        os.mkdir(target)
        for name in files:
            path = f"{folder}/{name}"
            if os.path.islink(path):
                links.append((os.readlink(path), f"{target}/{name}"))
            else:
                os.link(path, f"{target}/{name}")
        for name in dirs:
            if os.path.islink(f"{folder}/{name}"):
                links.append((os.readlink(f"{folder}/{name}"), f"{target}/{name}"))
        dirs[:] = [name for name in dirs if not os.path.islink(f"{folder}/{name}")]
    for link_target, path in links:  # last, as in every snapshot
        os.symlink(link_target, path)


def take_spare(folder: SnapshotFolder, sha: str) -> Path | None:
    """Claim the spare of `sha` for one build (renamed, so no one else takes it); None if none."""
    spare = spare_path(folder, sha)
    taken = folder.path / f"{TAKING_PREFIX}{sha}-{os.getpid()}-{threading.get_ident()}"
    try:
        os.rename(spare, taken)
    except OSError:
        return None
    listed = spare.with_name(spare.name + BLOB_LIST_SUFFIX)
    if listed.exists():
        os.rename(listed, taken.with_name(taken.name + BLOB_LIST_SUFFIX))
    return taken


def give_back(folder: SnapshotFolder, sha: str, taken: Path) -> None:
    """A build that failed puts the (restored) spare back for the next one."""
    os.rename(taken, spare_path(folder, sha))
    listed = taken.with_name(taken.name + BLOB_LIST_SUFFIX)
    if listed.exists():
        os.rename(listed, spare_path(folder, sha).with_name(f"{SPARE_PREFIX}{sha}{BLOB_LIST_SUFFIX}"))


def discard(folder: SnapshotFolder, path: Path) -> None:
    """Into the trash (folder.empty_trash deletes it and frees what only it linked)."""
    trash = folder.path / f".trash-{path.name.lstrip('.')}"
    listed = path.with_name(path.name + BLOB_LIST_SUFFIX)
    try:
        os.rename(path, trash)
        if listed.exists():
            os.rename(listed, trash.with_name(trash.name + BLOB_LIST_SUFFIX))
    except OSError as exc:
        log.warning("could not discard %s: %s", path.name, exc)


def stale_spares(folder: SnapshotFolder, keep: str | None) -> list[Path]:
    """What to discard under the refresh lock: the spares of any snapshot but `keep` (the served
    one), spares a dead build was taking apart, and spares a dead process was linking."""
    stale = []
    for entry in folder.path.iterdir():
        name = entry.name
        if name.endswith(BLOB_LIST_SUFFIX):
            continue
        if name.startswith(SPARE_PREFIX) and name != f"{SPARE_PREFIX}{keep}":
            stale.append(entry)
        elif name.startswith(TAKING_PREFIX):
            stale.append(entry)  # the refresh lock is held: no live build is taking it apart
        elif name.startswith(BUILDING_PREFIX) and not _alive(
            name.removeprefix(BUILDING_PREFIX).split("-")[1]
        ):
            stale.append(entry)
    return stale


def discard_stale_spares(folder: SnapshotFolder, keep: str) -> bool:
    """Discard the stale spares; True when a spare went to the trash (now, or what a build left
    of the one it took apart), for the caller to have it emptied."""
    stale = stale_spares(folder, keep)
    for path in stale:
        discard(folder, path)
    return bool(stale) or next(folder.path.glob(f".trash-{TAKING_PREFIX.lstrip('.')}*"), None) is not None


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Previous:
    """What a build may take apart: the served snapshot when no question reads it, else its
    spare (when one is ready). Given to MoveFrom (worker/repos/materialize.py) as claim/release;
    `retire` once the new snapshot serves."""

    folder: SnapshotFolder
    sha: str
    served: TakeApart
    spare: Path | None = None

    def claim(self) -> Path | None:
        root = self.served.claim()
        if root is None:
            self.spare = take_spare(self.folder, self.sha)
            return self.spare
        return root

    def release(self) -> None:
        """After MoveFrom.undo: what was claimed is whole again."""
        if self.spare is not None:
            try:
                give_back(self.folder, self.sha, self.spare)
            except OSError:
                discard(self.folder, self.spare)
            self.spare = None
        else:
            self.served.release()

    def retire(self) -> None:
        if self.spare is not None:
            discard(self.folder, self.spare)  # what is left of it
            self.spare = None
        else:
            self.served.retire()
