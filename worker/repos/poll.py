"""A scheduled poll of one repo (worker/repos/refresh.py): `git ls-remote` of its branch first,
and a fetch only when the branch's tip is not the commit this machine serves.

With webhooks set up, polling is the fallback for a delivery that never came, so it runs for
every repo and must cost next to nothing when nothing changed: one ls-remote (a ref
advertisement, no objects) instead of a fetch, a snapshot check and git maintenance. The
ls-remote runs as the fetch does (worker/repos/mirror_git.py): the remote's URL and credentials
only through the environment, never in argv; `--` before the remote name and the ref, so that
neither can be read as an option; the same timeout, after which git and its helpers are killed.
A failed ls-remote is no verdict: the poll fetches as it did before, logged and counted
(`codebot_polls_total{result="ls_remote_failed"}`), so a remote that refuses ls-remote is never
left unpolled.
"""

from __future__ import annotations

import logging

from redis import Redis

from worker.ops.metrics import count
from worker.repos.locks import is_sha
from worker.repos.mirror_git import REMOTE, GitError, run_mirror_git
from worker.repos.mirror_state import RepoPaths, current_sha, read_state
from worker.repos.mirrors import Mirrors, SyncResult, UnknownRepoError

log = logging.getLogger("codebot.refresh")

POLLS_METRIC = "codebot_polls_total"


def remote_tip(mirrors: Mirrors, name: str) -> str | None:
    """The commit the remote's branch points at now, by `git ls-remote`; None when there is no
    mirror or no branch known yet to ask about (the poll then fetches, as a first sync must).
    Raises GitError (scrubbed of credentials) when git fails or the branch is not there."""
    spec = mirrors.whitelist.get(name)
    if spec is None:
        raise UnknownRepoError(f"unknown repo {name!r}")
    paths = RepoPaths(mirrors.root / name)
    branch = spec.branch or read_state(paths).get("branch")
    if not isinstance(branch, str) or not branch or not (paths.mirror / "HEAD").exists():
        return None
    ref = f"refs/heads/{branch}"
    timeout = mirrors.settings.git_timeout_seconds
    out = run_mirror_git(spec, paths.mirror, ["ls-remote", "--", REMOTE, ref], timeout, mirrors.root)
    # A pattern matches any ref ending in it (refs/heads/x/refs/heads/main): take the exact one.
    for line in out.splitlines():
        sha, _, advertised = line.partition("\t")
        if advertised == ref and is_sha(sha):
            return sha
    raise GitError(f"branch {branch!r} not found on {spec.display_url}")


def poll(mirrors: Mirrors, redis: Redis, name: str) -> SyncResult | None:
    """Fetch `name` if its branch moved on the remote (or ls-remote could not say); None when
    the tip is the commit served here, and nothing was fetched."""
    served = current_sha(RepoPaths(mirrors.root / name))
    try:
        tip = remote_tip(mirrors, name)
    except GitError as exc:
        log.warning("scheduled poll of %s: git ls-remote failed (%s); fetching instead", name, exc)
        count(redis, POLLS_METRIC, result="ls_remote_failed")
        return mirrors.sync(name)
    if tip is not None and tip == served:
        log.info("scheduled poll of %s: still at %s, nothing fetched", name, tip[:7])
        count(redis, POLLS_METRIC, result="unchanged")
        return None
    count(redis, POLLS_METRIC, result="moved" if tip else "first_sync")
    return mirrors.sync(name)
