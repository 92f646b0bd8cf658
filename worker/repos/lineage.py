"""Which blobs are secret by lineage: decided once per mirror at each sync, consulted by every route.

A blob is secret by lineage when, in the history the mirror holds (its tracked branch, within
`history_depth`):

- it is stored under a secret file name (`secret_file_globs`) in any commit ("name"), or
- it is a credentials file by its content (as the processed store judges it) and has
  descendants ("content"), or
- it descends from a secret blob: a later version of a file renamed, copied or modified from
  one, also when the content changed in the same commit as the rename ("descent"), transitively;
  in a commit with more rename candidates than git pairs (`lineage_rename_limit`), the secret
  files are paired by content by lineage itself (worker/repos/lineage_descent.py).

Content is judged elsewhere, once per blob, by the processed blob store
(worker/repos/blob_process.py: credentials files withheld whole, secrets redacted). The verdict
here is the repo's part: it is written to the mirror (`codebot-secret-blobs`, one blob per
line with why), and read by the snapshot builder (such a blob becomes a "withheld" placeholder,
so read_file, search, blame, the symbol index and symlinks see no content) and by the history
tools (worker/repos/history_content.py: show, diff and log never show its versions).

The verdict is a function of the tip and the depth alone, never of when a machine synced: a
windowed mirror (`history_depth`) is rescanned whole at each new tip (a window forgets what left
it), seeded with what the history before its edge knows: the names and in-place edits of every
commit, from a blobless copy of the whole branch beside the mirror (`lineage.git`: commits and
trees only), so a secret file renamed at or before the edge is known whoever synced when. A
mirror of the whole history adds the new commits' names and descent edges to what it knew, then
takes the closure again (the same sets as a full scan, in any order); its descent edges are
kept beside the verdict (`codebot-lineage-edges`) for that.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from config.settings import Settings
from worker.repos.blob_process import process_blob
from worker.repos.blobstore import generation
from worker.repos.git_objects import ObjectReader
from worker.repos.git_read import GitProcess, GitReadError, read_env, run_git
from worker.repos.lineage_descent import (
    DESCENT,
    SKIPPED_WARNING,
    Suspect,
    closure,
    pair_by_content,
    suspect_of,
)
from worker.repos.lineage_records import (
    CHECKED_FILE,
    EDGES_FILE,
    WINDOW_FILE,
    Found,
    read_checked,
    read_edges,
    read_window,
    write,
    write_checked,
    write_edges,
    write_window,
)
from worker.repos.placeholders import WITHHELD
from worker.repos.secrets.redaction import get_redactor
from worker.repos.visible import secret_path

SECRET_BLOBS_FILE = "codebot-secret-blobs"
_FORMAT = "lineage-3"  # the first line of SECRET_BLOBS_FILE: "<format> <tip> <depth> <rules>"
_ZERO = "0" * 40
_EMPTY_BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # an empty file holds nothing to hide
NAME = "name"
CONTENT = "content"
REASONS = {
    NAME: "a secret file (by its name) in another commit",
    CONTENT: "it is, or was edited from, a credentials file (by its content)",
    DESCENT: "it descends from a secret file (renamed, copied or edited from one)",
}


def secret_blobs(git_dir: Path) -> dict[str, str] | None:
    """The mirror's verdict: blob sha -> NAME or DESCENT; None when there is none (never scanned,
    or the last scan failed and removed it): then no blob of its history may be shown."""
    try:
        stamp = (git_dir / SECRET_BLOBS_FILE).stat().st_mtime_ns
    except OSError:
        return None
    header, verdict = _read(git_dir, stamp)
    return verdict if header.startswith(_FORMAT + " ") else None


@functools.lru_cache(maxsize=16)
def _read(git_dir: Path, stamp: int) -> tuple[str, dict[str, str]]:
    """(header, verdict) of SECRET_BLOBS_FILE, read once per version of the file."""
    try:
        lines = (git_dir / SECRET_BLOBS_FILE).read_text(encoding="ascii").split("\n")
    except (OSError, UnicodeDecodeError):
        return "", {}
    verdict: dict[str, str] = {}
    for line in lines[1:]:
        sha, _, reason = line.partition(" ")
        if len(sha) == 40:
            verdict[sha] = reason if reason in REASONS else NAME
    return lines[0], verdict


def reason_of(verdict: Mapping[str, str], sha: str) -> str | None:
    """Why blob `sha` is withheld by lineage, in words; None when it is not."""
    why = verdict.get(sha)
    return None if why is None else REASONS[why]


@dataclass(frozen=True)
class Scan:
    verdict: dict[str, str]  # blob sha -> NAME or DESCENT
    edges: list[tuple[str, str]]  # descent edges seen (kept only for a mirror of the whole history)
    changed: bool  # differs from what the mirror has stored
    rules: str = ""  # the fingerprint of the names and rules it was decided with
    suspects: list[Suspect] = field(default_factory=list)  # diffs past the rename limit (kept too)


def scan(
    git_dir: Path,
    tip: str,
    depth: str,
    timeout: float,
    settings: Settings,
    seed: Mapping[str, str] | None = None,
    renames: bool = True,
) -> Scan:
    """The verdict for a mirror whose branch is at `tip`, fetched to `depth` ("all" or a count).

    `seed`: blobs already known secret from the history before the window (the full-history
    scan of a windowed mirror, which depends on `tip` only). `renames`: detect renames with an
    edit (needs the blobs; a blobless history gives exact renames by blob identity only).
    Raises GitReadError or OSError."""
    stamp = _stamp(git_dir)
    header, known = _read(git_dir, stamp) if stamp else ("", {})
    fmt, old_tip, old_depth, old_rules = [*header.split(" "), "", "", "", ""][:4]
    same = fmt == _FORMAT and old_rules == _rules(settings)  # else the names or rules changed: rescan
    if same and old_tip == tip and old_depth == depth:
        return Scan(dict(known), [], False, old_rules)
    # -M -C: a rename or a copy with an edit in the same commit is still one; -l: up to the limit
    # (lineage_descent.py pairs the secret files of the diffs past it); -m: a merge against each
    # parent; no --follow or pathspec, so every file of every commit is seen.
    detect = ["-M", "-C", f"-l{settings.lineage_rename_limit}"] if renames else ["--no-renames"]
    limit = settings.lineage_rename_limit if renames else None  # no renames looked for: none skipped
    if depth != "all":
        found = _window(git_dir, tip, timeout, limit, settings, detect)
    else:
        kept = read_edges(git_dir) if same and old_depth == "all" else None
        incremental = kept is not None and _is_ancestor(git_dir, old_tip, tip, timeout)
        found = kept if incremental and kept is not None else Found()
        if incremental:
            found.names = {sha for sha, why in known.items() if why == NAME}
        revs = [tip, f"^{old_tip}"] if incremental else [tip]
        # --no-mailmap: git log would read the tip's .mailmap, a blob a blobless copy lacks
        args = ["log", "--no-mailmap", "--raw", "--no-abbrev", *detect, "-m", "-z", "--format=%x1e", *revs]
        with GitProcess(git_dir, args, timeout, 1 << 40) as proc:
            new = _read_diffs(proc.chunks(), limit, settings).get("", Found())
            proc.finish()
            _check_skips(proc.stderr_text(), new.suspects)
        found.names |= new.names
        found.edges += new.edges
        found.suspects += new.suspects
    names, edges, suspects = found.names, found.edges, found.suspects
    content = _credentials_sources(git_dir, found, timeout, settings) if renames else set()
    known_now = {**(seed or {}), **dict.fromkeys(content, CONTENT), **dict.fromkeys(names, NAME)}
    verdict = pair_by_content(
        git_dir, closure(known_now, edges), edges, suspects, timeout, settings.history_diff_max_file_bytes
    )
    return Scan(verdict, edges, True, _rules(settings), suspects)


def _check_skips(stderr: str, suspects: list[Suspect]) -> None:
    """Fail closed when git says it skipped rename detection and lineage counted no diff past the
    limit: lineage counts at least git's candidates, so a git that counts otherwise would leave
    the verdict resting on renames nobody looked for."""
    if SKIPPED_WARNING in stderr and not suspects:
        raise GitReadError("git skipped rename detection where lineage counted no diff past the limit")


def _rules(settings: Settings) -> str:
    """What the verdict was decided with: the secret file names, the processing rules and the
    rename limit (which pairs git made, and which lineage made itself)."""
    digest = hashlib.sha256("\0".join(settings.secret_file_globs).encode())
    digest.update(f"\0{settings.lineage_rename_limit}\0{generation()}".encode())
    return digest.hexdigest()[:12]


def _credentials_sources(git_dir: Path, found: Found, timeout: float, settings: Settings) -> set[str]:
    """The blobs with descendants (edge sources, and the sources of diffs past the rename limit)
    that are credentials files by content (as the processed store judges them: a private key, a
    kubeconfig, …): their renamed or edited versions are secret by descent, even when the edit
    broke the shape content checks see.

    Each blob is judged once per mirror and set of rules (CHECKED_FILE)."""
    rules = _rules(settings)
    checked = read_checked(git_dir, rules)
    sources = {old for old, _ in found.edges}.union(*(suspect.sources for suspect in found.suspects))
    todo = sorted(sources - found.names - set(checked))
    if todo:
        reader = ObjectReader(git_dir, timeout)
        try:
            for start in range(0, len(todo), 500):
                blobs = reader.lookup_many(todo[start : start + 500], settings.history_diff_max_file_bytes)
                for sha, blob in blobs.items():
                    data = blob.data if blob is not None and blob.kind == "blob" else None
                    checked[sha] = data is not None and process_blob(data, get_redactor()).kind == WITHHELD
        finally:
            reader.close()
        write_checked(git_dir, rules, checked)
    return {sha for sha, secret in checked.items() if secret}


def store(git_dir: Path, tip: str, depth: str, found: Scan) -> None:
    """Write the verdict (atomically) where every route reads it; the edges for a mirror of the
    whole history, whose next scan reads only the new commits."""
    if depth == "all":
        write_edges(git_dir, Found(edges=found.edges, suspects=found.suspects))
    stale = WINDOW_FILE if depth == "all" else EDGES_FILE  # of the other kind of scan, if any
    with contextlib.suppress(OSError):
        (git_dir / stale).unlink()
    header = f"{_FORMAT} {tip} {depth} {found.rules}"
    lines = [header, *(f"{sha} {why}" for sha, why in sorted(found.verdict.items()))]
    write(git_dir / SECRET_BLOBS_FILE, "\n".join(lines) + "\n")


def record(
    git_dir: Path, tip: str, depth: str, timeout: float, settings: Settings, renames: bool = True
) -> dict[str, str]:
    """Scan and store; the verdict."""
    found = scan(git_dir, tip, depth, timeout, settings, renames=renames)
    if found.changed:
        store(git_dir, tip, depth, found)
    return found.verdict


def forget(git_dir: Path) -> None:
    """Remove the stored verdict: until a scan succeeds, the history tools show no file content."""
    for name in (SECRET_BLOBS_FILE, EDGES_FILE, CHECKED_FILE, WINDOW_FILE):
        with contextlib.suppress(OSError):
            (git_dir / name).unlink()


# --- the scan ----------------------------------------------------------------------------------


def _diffs(chunks: Iterable[bytes]) -> Iterator[tuple[str, list[tuple[list[str], list[str]]]]]:
    """The diffs of `git log --raw -z --format=%x1e…`, one per commit and parent: what followed
    its \x1e (a commit's sha, or nothing) and its entries (the five fields, the paths). A \x1e
    inside a path is read as part of the path: entries are read field by field."""
    pending = b""
    head: list[str] | None = None
    paths: list[str] = []
    title: str | None = None
    entries: list[tuple[list[str], list[str]]] = []
    for chunk in chunks:
        tokens = (pending + chunk).split(b"\0")
        pending = tokens.pop()
        for token in tokens:
            if head is not None:
                paths.append(os.fsdecode(token))
                if len(paths) == (2 if head[4][:1] in ("R", "C") else 1):
                    entries.append((head, paths))
                    head, paths = None, []
            elif token.lstrip(b"\n").startswith(b":"):
                fields = token.lstrip(b"\n")[1:].decode("ascii", "replace").split()
                head = fields if len(fields) == 5 else None
            elif token.startswith(b"\x1e"):
                if title is not None:
                    yield title, entries
                title, entries = token[1:].decode("ascii", "replace").strip(), []
    if title is not None:
        yield title, entries


def _read_diffs(chunks: Iterable[bytes], limit: int | None, settings: Settings) -> dict[str, Found]:
    """What the diffs tell, by what followed their \x1e (a commit's sha, or "" for all): blobs
    under a secret name, descent edges (old blob -> new blob of a rename, copy, modification or
    type change), and the diffs whose rename candidates pass `limit` (where git may have paired
    nothing: lineage_descent.py; None: git was asked for no renames)."""
    found: dict[str, Found] = {}
    for title, entries in _diffs(chunks):
        into = found.setdefault(title, Found())
        candidates = _Candidates()
        for head, paths in entries:
            _entry(head, paths, into.names, into.edges, settings)
            candidates.add(head)
        if limit is not None and (suspect := candidates.suspect(limit)) is not None:
            into.suspects.append(suspect)
    return found


class _Candidates:
    """The rename candidates of one diff as git counts them: its sources (every entry with an old
    side: deleted, changed, renamed or copied, as -C takes them) times its added files."""

    def __init__(self) -> None:
        self.sources: list[str] = []  # the blobs worth pairing: empty files hold nothing
        self.added: list[str] = []
        self.source_count = self.added_count = 0

    def add(self, head: list[str]) -> None:
        old_sha, new_sha = head[2], head[3]
        if head[4][:1] == "A":
            self.added_count += 1
            self.added += [new_sha] if new_sha not in (_ZERO, _EMPTY_BLOB) else []
        elif old_sha != _ZERO:
            self.source_count += 1
            self.sources += [old_sha] if old_sha != _EMPTY_BLOB else []

    def suspect(self, limit: int) -> Suspect | None:
        return suspect_of(self.sources, self.added, self.source_count * self.added_count, limit)


def _entry(head: list[str], paths: list[str], names: set[str], edges: list[tuple[str, str]],
           settings: Settings) -> None:  # fmt: skip
    old_sha, new_sha = head[2], head[3]
    blobs = [sha for sha in (old_sha, new_sha) if sha not in (_ZERO, _EMPTY_BLOB)]
    if any(secret_path(path, settings) is not None for path in paths):
        # Both sides: a blob stored under a secret name on either side of a rename is secret.
        names.update(blobs)
    elif old_sha not in (_ZERO, _EMPTY_BLOB) and new_sha not in (_ZERO, _EMPTY_BLOB) and old_sha != new_sha:
        edges.append((old_sha, new_sha))


def _window(
    git_dir: Path, tip: str, timeout: float, limit: int | None, settings: Settings, detect: list[str]
) -> Found:
    """The names, descent edges and suspect diffs of a windowed mirror's commits, each commit read
    from git once: what a commit contributes depends on the commit alone, so it is kept
    (WINDOW_FILE) while the commit is in the window, and a refresh reads only the new commits.
    The commits at the shallow edge are left out: git shows them as if every file were added, and
    every name they hold is already in the seed from the whole branch (`lineage.git`), which a
    windowed scan always gets; so the verdict is the one a full rescan of the window gives."""
    key = " ".join([_rules(settings), *detect])
    kept = read_window(git_dir, key)
    commits = run_git(git_dir, ["rev-list", tip], timeout, 1 << 40).data.decode("ascii").split()
    try:
        edge = set((git_dir / "shallow").read_text(encoding="ascii").split())
    except FileNotFoundError:
        edge = set()
    wanted = [commit for commit in commits if commit not in edge]
    todo = [commit for commit in wanted if commit not in kept]
    if todo:
        args = ["log", "--no-mailmap", "--raw", "--no-abbrev", *detect, "-m", "-z", "--format=%x1e%H",
                "--no-walk=unsorted", "--stdin"]  # fmt: skip
        found = _entries_by_commit(git_dir, args, "".join(f"{c}\n" for c in todo), timeout, limit, settings)
        kept.update({commit: found.get(commit, Found()) for commit in todo})
    window = {commit: kept[commit] for commit in wanted}
    write_window(git_dir, key, window)
    every = Found()
    for one in window.values():
        every.names |= one.names
        every.edges += one.edges
        every.suspects += one.suspects
    return every


def _entries_by_commit(
    git_dir: Path, args: list[str], stdin: str, timeout: float, limit: int | None, settings: Settings
) -> dict[str, Found]:
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), "--no-pager", *args],
        input=stdin.encode("ascii"),
        capture_output=True,
        timeout=timeout,
        env=read_env(),
    )
    if done.returncode != 0:
        raise GitReadError(f"git log failed: {done.stderr.decode('utf-8', 'replace').strip()[-300:]}")
    found = _read_diffs([done.stdout], limit, settings)
    _check_skips(done.stderr.decode("utf-8", "replace"), [s for one in found.values() for s in one.suspects])
    return found


def _is_ancestor(git_dir: Path, old: str, new: str, timeout: float) -> bool:
    if len(old) != 40:
        return False
    try:
        with GitProcess(git_dir, ["merge-base", "--is-ancestor", old, new], timeout, 1000) as proc:
            list(proc.chunks())
            proc.finish()
    except GitReadError:
        return False  # not an ancestor (exit 1), or gone (a force push, a trim): scan it all
    return True


def _stamp(git_dir: Path) -> int:
    try:
        return (git_dir / SECRET_BLOBS_FILE).stat().st_mtime_ns
    except OSError:
        return 0
