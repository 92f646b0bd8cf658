"""What the history tools share: the mirror of a repo in scope, refs and paths checked before git
sees them, and how commits, dates and authors are shown.

Refs the model sends are checked first: a sha (7-40 hex digits), a tag or branch name,
optionally with `~N`/`^N`; never an option, a range, `ref:path` (a file's content by another
road) or a reflog. `HEAD` and the snapshot's branch mean the snapshot's commit, so a refresh
during a question changes nothing it reads. Only commits reachable from the snapshot's commit
(within the mirror's depth) resolve: a force-pushed commit still in the object store is "not
in the history", by its full sha, a prefix or a tag, and an abbreviation is resolved among
reachable commits only. Author names are redacted; e-mail addresses are
shown only when `history_show_emails` is on.
"""

from __future__ import annotations

import functools
import re
import time
from pathlib import Path

from worker.repos.git_objects import ObjectReader, object_reader
from worker.repos.git_read import GitReadError, run_git, shallow_edge
from worker.repos.history import Commit, read_commit
from worker.repos.mirror_git import history_depth
from worker.repos.snapshot import Snapshot
from worker.repos.visible import shown_name, unshown
from worker.tools.context import ToolContext, ToolError
from worker.tools.paths import check_relative_path

SHORT = 10  # sha characters shown; citations take 7 or more
MIN_ABBREV = 7  # fewer hex digits than this are refused: a short prefix would probe the object store
_HEX = re.compile(r"[0-9a-fA-F]{1,40}")
_REF_BASE = re.compile(
    r"^(?![-./])(?!.*\.\.)(?!.*//)(?!.*@\{)(?!.*\.lock$)[A-Za-z0-9._/@+-]{1,200}(?<![./])$"
)
_REF_SUFFIX = re.compile(r"^(?:~\d{0,6}|\^\d?)*$")
COMMIT_MAX_BYTES = 4 << 20  # a commit object larger than this (a giant message) is not read


def mirror(ctx: ToolContext, repo: str) -> tuple[Snapshot, Path, ObjectReader]:
    snapshot = ctx.snapshot(repo)
    git_dir = snapshot.git_dir
    if git_dir is None or not (git_dir / "HEAD").is_file():
        raise ToolError(
            f"repo {snapshot.repo.name!r} has no history here (its mirror is missing); the code tools "
            "(search, read_file) still work"
        )
    return snapshot, git_dir, object_reader(git_dir, ctx.settings.history_timeout_seconds)


def depth_note(ctx: ToolContext, snapshot: Snapshot, git_dir: Path, reader: ObjectReader) -> str | None:
    """Where the mirror's history starts, when it does not reach the first commit."""
    edge = shallow_edge(git_dir)
    if not edge:
        return None
    times = []
    for sha in sorted(edge)[:20]:
        commit = read_commit(reader, sha, COMMIT_MAX_BYTES)
        if commit is not None:
            times.append(commit.committer.time)
    depth = history_depth(snapshot.repo, ctx.settings)
    kept = f"its last {depth:,} commits" if depth else "part of its history"
    since = f": nothing before {day(min(times))} is visible" if times else ""
    return f"[the mirror of {snapshot.repo.name} keeps {kept} (history_depth){since}]"


def day(seconds: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(seconds))


def when(seconds: int, tz: str) -> str:
    try:
        offset = (1 if tz[0] == "+" else -1) * (int(tz[1:3]) * 3600 + int(tz[3:5]) * 60)
    except (ValueError, IndexError):
        offset, tz = 0, "+0000"
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(seconds + offset)) + f" {tz}"


def shown_person(ctx: ToolContext, name: str, email: str) -> str:
    shown = " ".join(name.split()) or "unknown"
    if ctx.settings.history_show_emails and email:
        shown += f" <{email}>"
    return ctx.redact(shown)


def history_path(ctx: ToolContext, path: str) -> str:
    relative = check_relative_path(unshown(path), ctx.settings)
    if not relative:
        raise ToolError("give a file or folder path, or leave path out for the whole repo")
    return relative


def resolve_ref(ctx: ToolContext, snapshot: Snapshot, git_dir: Path, reader: ObjectReader, ref: str,
                what: str) -> Commit:  # fmt: skip
    """The commit a ref the model sent names, or ToolError saying what to pass instead."""
    text = ref.strip()
    cut = min((i for i in (text.find("~"), text.find("^")) if i >= 0), default=len(text))
    base, suffix = text[:cut], text[cut:]
    if not _REF_BASE.fullmatch(base) or not _REF_SUFFIX.fullmatch(suffix):
        raise ToolError(
            f"{what} {shown_name(ref)[:80]!r} is not something codebot can look up: give a commit sha "
            "(7 to 40 hex digits), a tag, or the branch name, optionally followed by ~N (N commits "
            "before) — no ranges, options or paths"
        )
    if base in ("HEAD", "@", snapshot.branch):
        base = snapshot.sha  # the question's commit, even when the mirror fetched a newer one since
    elif _HEX.fullmatch(base) and len(base) < 40 and not _is_ref(reader, base):
        if len(base) < MIN_ABBREV:
            raise ToolError(
                f"{what} {text!r} is too short to look up: give at least {MIN_ABBREV} hex digits of the sha"
            )
        base = _abbreviated(ctx, snapshot, git_dir, reader, base, what) or base
    commit = read_commit(reader, base + suffix, COMMIT_MAX_BYTES)
    if commit is not None and not reachable(ctx, git_dir, snapshot.sha, commit.sha):
        commit = None  # a commit the branch no longer reaches (a force push) is not history here
    if commit is None:
        hint = ""
        if re.fullmatch(r"[0-9a-fA-F]{7,39}", text):
            hint = " (if it is an abbreviated sha, give more of its digits)"
        note = depth_note(ctx, snapshot, git_dir, reader)
        tags = _recent_tags(ctx, git_dir)
        raise ToolError(
            f"{what} {text!r} is not in the history of {snapshot.repo.name} here{hint}. "
            + (f"{note[1:-1]}. " if note else "")
            + (f"Recent tags: {', '.join(tags)}." if tags else "The mirror holds no tags.")
        )
    return commit


def _is_ref(reader: ObjectReader, name: str) -> bool:
    """Whether a hex-looking name is a tag or a branch (then it is looked up as one)."""
    return any(reader.lookup(f"refs/{kind}/{name}", 1 << 16) is not None for kind in ("tags", "heads"))


def _abbreviated(ctx: ToolContext, snapshot: Snapshot, git_dir: Path, reader: ObjectReader, prefix: str,
                 what: str) -> str | None:  # fmt: skip
    """The one commit reachable from the snapshot whose sha starts with `prefix`; None for none.

    Among reachable commits only: an object the branch no longer reaches (a force-pushed commit
    not yet pruned) neither resolves nor makes a prefix ambiguous."""
    try:
        out = run_git(git_dir, ["rev-parse", f"--disambiguate={prefix.lower()}"],
                      ctx.time_left(ctx.settings.history_timeout_seconds), 1 << 20)  # fmt: skip
    except GitReadError:
        return None
    candidates = [line for line in out.data.decode("ascii", "replace").split() if len(line) == 40][:50]
    kinds = reader.lookup_many(candidates, -1) if candidates else {}
    commits = [
        sha
        for sha, found in kinds.items()
        if found is not None and found.kind == "commit" and reachable(ctx, git_dir, snapshot.sha, sha)
    ]
    if len(commits) > 1:
        raise ToolError(f"{what} {prefix!r} is ambiguous here: give more of its digits")
    return commits[0] if commits else None


def reachable(ctx: ToolContext, git_dir: Path, tip: str, sha: str) -> bool:
    """Whether commit `sha` is `tip` or one of its ancestors in the mirror's window."""
    if sha == tip:
        return True
    return _is_ancestor(git_dir, tip, sha, _packs(git_dir), ctx.settings.history_timeout_seconds)


@functools.lru_cache(maxsize=4096)
def _is_ancestor(git_dir: Path, tip: str, sha: str, stamp: tuple[float, float], timeout: float) -> bool:
    try:
        run_git(git_dir, ["merge-base", "--is-ancestor", sha, tip], timeout, 1000)
    except GitReadError:
        return False  # exit 1: not an ancestor; or git could not say: not shown either way
    return True


def _packs(git_dir: Path) -> tuple[float, float]:
    """Changes when a fetch or a prune changes the mirror (then reachability is asked afresh)."""
    stamps = []
    for path in (git_dir / "shallow", git_dir / "objects" / "pack"):
        try:
            stamps.append(path.stat().st_mtime)
        except OSError:
            stamps.append(0.0)
    return stamps[0], stamps[1]


def _recent_tags(ctx: ToolContext, git_dir: Path, count: int = 10) -> list[str]:
    try:
        out = run_git(
            git_dir,
            [
                "for-each-ref",
                "--sort=-creatordate",
                f"--count={count}",
                "--format=%(refname:short)",
                "refs/tags",
            ],
            ctx.time_left(ctx.settings.history_timeout_seconds),
            64_000,
        )
    except GitReadError:
        return []
    return [shown_name(line) for line in out.data.decode("utf-8", "replace").splitlines() if line]


def git(ctx: ToolContext, git_dir: Path, args: list[str]) -> bytes:
    try:
        timeout = ctx.time_left(ctx.settings.history_timeout_seconds)
        out = run_git(git_dir, args, timeout, ctx.settings.history_output_max_bytes)
    except GitReadError as exc:
        raise ToolError(f"git could not answer: {exc}") from None
    return out.data
