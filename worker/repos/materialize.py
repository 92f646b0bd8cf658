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
from pathlib import Path

from config.settings import Settings
from worker.repos.blob_worker import object_file
from worker.repos.blobstore import BlobStore
from worker.repos.disk import human_bytes
from worker.repos.placeholders import OVERSIZED, WITHHELD, placeholder
from worker.repos.snapshot_plan import Plan
from worker.repos.visible import shown_name

log = logging.getLogger(__name__)


def _link(source: str, destination: str) -> None:
    try:
        os.link(source, destination)
    except OSError as exc:
        if exc.errno not in (errno.EMLINK, errno.EXDEV, errno.EPERM, errno.ENOTSUP):
            raise
        shutil.copyfile(source, destination)  # too many links, or a file system without them


def materialize(
    root: Path, plan: Plan, targets: dict[str, str], store: BlobStore, settings: Settings
) -> set[str]:
    """Write the tree into `root`; the paths of files that could not be written."""
    failed: set[str] = set()
    # Plain strings, not Path objects: per file, pathlib's joins cost as much as the link itself.
    base, objects = os.fspath(root), os.fspath(store.objects)
    written = (*plan.files, *(entry for entry, _ in plan.withheld), *plan.links)
    folders = sorted({p.rsplit("/", 1)[0] for e in written if "/" in (p := e.path)})
    folders += [e.path for e in plan.submodules]
    for folder in folders:
        try:
            os.makedirs(f"{base}/{folder}", exist_ok=True)
        except OSError as exc:
            log.warning("could not make folder %r: %s", shown_name(folder), exc)
    for entry in plan.files:
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
    for entry, why in plan.withheld:
        try:
            Path(f"{base}/{entry.path}").write_bytes(placeholder(WITHHELD, entry.size, why))
        except OSError as exc:
            failed.add(entry.path)
            log.warning("could not write %r: %s", shown_name(entry.path), exc)
    for entry in plan.links:  # last: no link can redirect where a file above was written
        try:
            os.symlink(targets.get(entry.path, ""), f"{base}/{entry.path}")
        except OSError as exc:
            failed.add(entry.path)
            log.warning("could not make link %r: %s", shown_name(entry.path), exc)
    return failed
