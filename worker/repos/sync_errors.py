"""What kind of failure a sync met, as one stable word: the history counts syncs by it (which
repo fails, and why: a dead remote, a full disk, a repo over a cap), while the error's own text
(scrubbed of credentials) says the details."""

from __future__ import annotations

from worker.repos.assemble import SnapshotRefused
from worker.repos.disk import DiskFull
from worker.repos.locks import LockTimeout
from worker.repos.mirror_git import GitError, GitOutOfSpace, GitTimedOut

TIMEOUT = "timeout"  # a git step outlived git_timeout_seconds
DISK = "disk"  # the free space fell under the reserve
REFUSED = "refused"  # the commit may not become a snapshot (over a cap)
GIT = "git"  # git failed: the remote unreachable, a credential refused, the branch gone
BUSY = "busy"  # another refresh of the repo held its lock for longer than we wait
FILESYSTEM = "filesystem"  # reading or writing the data directory failed
INVALID = "invalid"  # what git or the repo gave could not be read

KINDS = (TIMEOUT, DISK, REFUSED, GIT, BUSY, FILESYSTEM, INVALID)


def error_kind(exc: BaseException) -> str:
    """The kind of a sync's failure, most specific first (a GitTimedOut is a GitError too)."""
    ordered: tuple[tuple[type[BaseException], str], ...] = (
        (GitTimedOut, TIMEOUT),
        (GitOutOfSpace, DISK),
        (DiskFull, DISK),
        (SnapshotRefused, REFUSED),
        (GitError, GIT),
        (LockTimeout, BUSY),
        (OSError, FILESYSTEM),
    )
    return next((kind for cls, kind in ordered if isinstance(exc, cls)), INVALID)
