"""git on one repo's mirror for the mirrors: the fetch and the repack, and the mirrors' side of
lineage (worker/repos/lineage.py): the verdict decided at each sync, the blobless copy of the
whole branch a windowed mirror learns its edge from, and the prune after a force push.

Runs under the repo's refresh lock, on the git of worker/repos/mirror_git.py (the remote's URL
and credentials from the environment, a timeout, the disk reserve watched).
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

from config.repos import RepoSpec
from config.settings import Settings
from worker.repos import lineage
from worker.repos.disk import check_room, free_bytes, remove_partial_fetch, under_reserve
from worker.repos.git_read import GitReadError
from worker.repos.mirror_git import REMOTE, GitError, Progress, history_depth, run_mirror_git

log = logging.getLogger(__name__)

WINDOW_REPACKED = "codebot-window-repacked"  # in mirror.git: its window's deltas were recomputed
NO_TEMPLATE = "--template="  # no sample hooks, description or info/exclude: nothing runs or reads them


class MirrorGit:
    """git on one repo's mirror (`mirror.git`) and its blobless copy (`lineage.git`)."""

    def __init__(self, spec: RepoSpec, root: Path, data_root: Path, settings: Settings) -> None:
        self.spec = spec
        self.mirror = root / "mirror.git"
        self.side = root / "lineage.git"  # a windowed mirror's whole branch, without blobs
        self.data_root = data_root
        self.settings = settings

    def _git(self, git_dir: Path, args: list[str], reserve: int = 0) -> str:
        return run_mirror_git(
            self.spec, git_dir, args, self.settings.git_timeout_seconds, self.data_root, reserve
        )

    def fetch(self, report: Progress) -> str:
        """Bring the branch's tip into the mirror; returns the branch fetched."""
        if not (self.mirror / "HEAD").exists():
            self._git_reporting(["init", "--bare", "--quiet", NO_TEMPLATE])
        remove_partial_fetch(self.mirror)  # what a fetch killed mid-way (a crash, SIGKILL) left
        reserve = self.settings.disk_reserve_bytes
        check_room(self.data_root, 0, reserve, f"fetch {self.spec.name}")
        report("connecting", None)
        try:
            branch = self.spec.branch or self._default_branch()
        except GitError as exc:
            raise GitError(f"fetch failed: {exc}") from None
        try:
            # Tags are followed (not --no-tags): git fetches the tags that point into the history
            # fetched, so `diff` and `log` know them; older tags stay out with that history.
            args = ["fetch", "--progress", "--prune", "--no-auto-gc", "--no-write-fetch-head"]
            depth = history_depth(self.spec, self.settings)
            if depth is not None:
                args.append(f"--depth={depth}")  # deepens or shortens the history to `depth` commits
            elif (self.mirror / "shallow").exists():
                args.append("--unshallow")
            self._git_reporting(
                [*args, REMOTE, f"+refs/heads/{branch}:refs/heads/{branch}"], report, watch_disk=True
            )
            if reserve and (free := free_bytes(self.data_root)) < reserve:
                # A fetch faster than the watchdog's look: it landed, but nothing more is written.
                raise GitError(under_reserve("git fetch", free, reserve))
        except GitError as exc:
            remove_partial_fetch(self.mirror)
            if "couldn't find remote ref" in str(exc):
                raise GitError(
                    f"fetch failed: branch {branch!r} not found on {self.spec.display_url}"
                ) from None
            raise GitError(f"fetch failed: {exc}") from None
        return branch

    def _default_branch(self) -> str:
        out = self._git_reporting(["ls-remote", "--symref", REMOTE, "HEAD"])
        match = re.search(r"^ref: refs/heads/(\S+)\tHEAD$", out, re.MULTILINE)
        if not match:
            raise GitError(
                f"{self.spec.display_url} has no default branch (empty?): set branch in the repos file"
            )
        return match.group(1)

    def window_needs_repack(self) -> bool:
        """Whether this is a windowed mirror whose deltas were never recomputed. A shallow fetch
        sends every object whose delta base lies before the edge whole: pallets/flask's last
        1,000 of 5,531 commits arrived as 11.9 MiB, about its whole history's 12.1 MiB, and are
        7.3 MiB once repacked. Later fetches add small packs with deltas against what is here."""
        return (self.mirror / "shallow").exists() and not (self.mirror / WINDOW_REPACKED).exists()

    def repack_window(self) -> None:
        """Recompute the deltas of a windowed mirror, once (`window_needs_repack`); the caller
        holds the repo's refresh lock. A reader's cat-file restarts when the packs change."""
        try:
            self._git(self.mirror, ["-c", "gc.autoDetach=false", "repack", "-a", "-d", "-f", "-q"])
        except GitError as exc:
            log.warning("repacking the mirror of %s failed: %s", self.spec.name, exc)
            return
        (self.mirror / WINDOW_REPACKED).touch()

    def maintain(self) -> None:
        """Repack the mirror now and then, in the foreground so that it stays under our lock."""
        try:
            self._git(self.mirror, ["-c", "gc.autoDetach=false", "gc", "--auto", "--quiet"])
            tags = self.mirror / "refs" / "tags"
            if tags.is_dir() and any(tags.iterdir()):
                # One file for every tag instead of a 4 kB block each (gitleaks: 0.7 MB of them)
                self._git(self.mirror, ["pack-refs", "--all", "--prune"])
        except (GitError, OSError) as exc:
            log.warning("git gc or pack-refs of %s failed: %s", self.spec.name, exc)

    def _git_reporting(
        self, args: list[str], report: Progress | None = None, watch_disk: bool = False
    ) -> str:
        reserve = self.settings.disk_reserve_bytes if watch_disk else 0
        return run_mirror_git(
            self.spec, self.mirror, args, self.settings.git_timeout_seconds, self.data_root, reserve, report
        )

    def secret_blobs(
        self, tip: str, branch: str, report: Progress, rewritten: bool = False
    ) -> dict[str, str]:
        """Decide which blobs of the fetched history are secret by lineage, store the verdict for
        the history tools, and return it for the snapshot build.

        Fail closed: when the scan fails, GitError (the sync fails and the last good snapshot
        keeps serving) and the stored verdict is removed, so the history tools show no file
        content; when only storing it fails, the snapshot is built with it and the history
        tools show no content until a sync stores one. `rewritten`: the branch was force-pushed;
        the blobless copy is then fetched afresh (git keeps a partial clone's fetched objects
        even when nothing reaches them, and they name the files of the commits pushed away)."""
        whole = self.holds_whole_branch()
        if rewritten or whole:
            shutil.rmtree(self.side, ignore_errors=True)  # a whole mirror needs no blobless copy
        depth = "all" if whole else str(history_depth(self.spec, self.settings))
        timeout = self.settings.git_timeout_seconds
        try:
            seed = None if whole else self._before_the_edge(tip, branch, report)
            found = lineage.scan(self.mirror, tip, depth, timeout, self.settings, seed)
        except (GitError, GitReadError, OSError) as exc:
            lineage.forget(self.mirror)
            raise GitError(f"listing the secret files in the history failed: {exc}") from None
        if found.changed:
            try:
                lineage.store(self.mirror, tip, depth, found)
            except OSError as exc:
                lineage.forget(self.mirror)
                log.warning("storing the secret files of the history of %s failed: %s", self.spec.name, exc)
        return found.verdict

    def holds_whole_branch(self) -> bool:
        """Whether the mirror reaches the branch's first commit: no `history_depth`, or a window
        deep enough for the whole branch (git writes `shallow` only when a depth cut a parent
        off). Depth counts along every parent, so a branch with merges can hold more commits
        than the depth and still fit: spf13/cobra's 1,106 and gitleaks/gitleaks's 1,291 commits
        fit in 1,000. Such a mirror is its own lineage: `lineage.git` would repeat its commits
        and trees, about a third of its size."""
        depth = history_depth(self.spec, self.settings)
        return depth is None or not (self.mirror / "shallow").exists()

    def _before_the_edge(self, tip: str, branch: str, report: Progress) -> dict[str, str]:
        """What the history before a windowed mirror's edge knows: every blob named secret (or
        edited in place from one) in any commit of the branch, from a blobless copy of it
        (commits and trees only, `lineage.git`). Raises GitError when it cannot be fetched."""
        if not (self.side / "HEAD").exists():
            self._git(self.side, ["init", "--bare", "--quiet", NO_TEMPLATE])
        report("reading the names in the whole history", None)
        remove_partial_fetch(self.side)
        self._git(
            self.side,
            ["fetch", "--filter=blob:none", "--no-tags", "--prune", "--no-auto-gc", "--no-write-fetch-head",
             REMOTE, f"+refs/heads/{branch}:refs/heads/{branch}"],
            self.settings.disk_reserve_bytes,
        )  # fmt: skip
        timeout = self.settings.git_timeout_seconds
        return lineage.record(self.side, tip, "all", timeout, self.settings, renames=False)

    def branch_tip(self, branch: str | None) -> str | None:
        """The branch's commit in the mirror before a fetch; None for a new mirror."""
        if not branch or not (self.mirror / "HEAD").exists():
            return None
        try:
            return self._git(
                self.mirror, ["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}"]
            )
        except GitError:
            return None

    def is_ancestor(self, old: str, new: str) -> bool:
        try:
            self._git(self.mirror, ["merge-base", "--is-ancestor", old, new])
        except GitError:
            return False
        return True

    def prune(self, why: str) -> None:
        """Delete every object the branch no longer reaches: after a force push (the usual answer
        to a committed secret) its old commits must not stay readable by sha, and after a
        shorter `history_depth` the history beyond the new edge frees its space. git's own gc
        would keep them two more weeks."""
        args = ["-c", "gc.autoDetach=false", "-c", "gc.reflogExpire=now", "-c", "gc.reflogExpireUnreachable=now",
                "gc", "--prune=now", "--quiet"]  # fmt: skip
        try:
            self._git(self.mirror, args)
            log.info("pruned the history of %s after %s", self.spec.name, why)
        except GitError as exc:
            log.warning("pruning the history of %s after %s failed: %s", self.spec.name, why, exc)
