"""Which blobs are secret by lineage: decided once per mirror at each sync, consulted by every route.

A blob is secret by lineage when, in the history the mirror holds (its tracked branch, within
`history_depth`):

- it is stored under a secret file name (`secret_file_globs`) in any commit ("name"), or
- it is a credentials file by its content (as the processed store judges it) and has
  descendants ("content"), or
- it descends from a secret blob: a later version of a file renamed, copied or modified from
  one, also when the content changed in the same commit as the rename ("descent"), transitively.

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
import gzip
import hashlib
import os
import subprocess
import zlib
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from config.settings import Settings
from worker.repos.blob_process import process_blob
from worker.repos.blobstore import generation
from worker.repos.git_objects import ObjectReader
from worker.repos.git_read import GitProcess, GitReadError, read_env
from worker.repos.placeholders import WITHHELD
from worker.repos.redaction import get_redactor
from worker.repos.visible import secret_path

SECRET_BLOBS_FILE = "codebot-secret-blobs"
EDGES_FILE = "codebot-lineage-edges"
WINDOW_FILE = "codebot-lineage-window"  # a windowed mirror: each commit's names and edges
_FORMAT = "lineage-2"  # the first line of SECRET_BLOBS_FILE: "<format> <tip> <depth>"
_ZERO = "0" * 40
_EMPTY_BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # an empty file holds nothing to hide
NAME = "name"
CONTENT = "content"
DESCENT = "descent"
REASONS = {
    NAME: "a secret file (by its name) in another commit",
    CONTENT: "it is, or was edited from, a credentials file (by its content)",
    DESCENT: "it descends from a secret file (renamed, copied or edited from one)",
}
CHECKED_FILE = "codebot-lineage-checked"  # blobs whose content was judged: "<sha> 0|1"
_GZIP_MAGIC = b"\x1f\x8b"  # EDGES_FILE, WINDOW_FILE and CHECKED_FILE are gzipped (_write)


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
    # -M -C: a rename or a copy with an edit in the same commit is still one; -m: a merge against
    # each parent; no --follow or pathspec, so every file of every commit is seen.
    detect = ["-M", "-C"] if renames else ["--no-renames"]
    if depth != "all":
        names, edges = _window(git_dir, tip, timeout, settings, detect)
    else:
        kept = _read_edges(git_dir) if same and old_depth == "all" else None
        incremental = kept is not None and _is_ancestor(git_dir, old_tip, tip, timeout)
        names = {sha for sha, why in known.items() if why == NAME} if incremental else set()
        edges = kept if incremental and kept is not None else []
        revs = [tip, f"^{old_tip}"] if incremental else [tip]
        # --no-mailmap: git log would read the tip's .mailmap, a blob a blobless copy lacks
        args = ["log", "--no-mailmap", "--raw", "--no-abbrev", *detect, "-m", "-z", "--format=%x1e", *revs]
        with GitProcess(git_dir, args, timeout, 1 << 40) as proc:
            edges += _entries(proc.chunks(), names, settings)
            proc.finish()
    content = _credentials_sources(git_dir, edges, names, timeout, settings) if renames else set()
    known_now = {**(seed or {}), **dict.fromkeys(content, CONTENT), **dict.fromkeys(names, NAME)}
    return Scan(_closure(known_now, edges), edges, True, _rules(settings))


def _rules(settings: Settings) -> str:
    """What the verdict was decided with: the secret file names and the processing rules."""
    digest = hashlib.sha256("\0".join(settings.secret_file_globs).encode())
    digest.update(generation().encode())
    return digest.hexdigest()[:12]


def _credentials_sources(
    git_dir: Path, edges: list[tuple[str, str]], names: set[str], timeout: float, settings: Settings
) -> set[str]:
    """The blobs with descendants (edge sources) that are credentials files by content (as the
    processed store judges them: a private key, a kubeconfig, …): their renamed or edited
    versions are secret by descent, even when the edit broke the shape content checks see.

    Each blob is judged once per mirror and set of rules (CHECKED_FILE)."""
    rules = _rules(settings)
    checked = _read_checked(git_dir, rules)
    todo = sorted({old for old, _ in edges} - names - set(checked))
    if todo:
        reader = ObjectReader(git_dir, timeout)
        try:
            for start in range(0, len(todo), 500):
                found = reader.lookup_many(todo[start : start + 500], settings.history_diff_max_file_bytes)
                for sha, blob in found.items():
                    data = blob.data if blob is not None and blob.kind == "blob" else None
                    checked[sha] = data is not None and process_blob(data, get_redactor()).kind == WITHHELD
        finally:
            reader.close()
        lines = [rules, *(f"{sha} {int(secret)}" for sha, secret in sorted(checked.items()))]
        _write(git_dir / CHECKED_FILE, "\n".join(lines) + "\n", packed=True)
    return {sha for sha, secret in checked.items() if secret}


def _read_checked(git_dir: Path, rules: str) -> dict[str, bool]:
    lines = (_read_text(git_dir / CHECKED_FILE) or "").split("\n")
    if lines[0] != rules:
        return {}
    return {line[:40]: line[41:] == "1" for line in lines[1:] if len(line) == 42}


def store(git_dir: Path, tip: str, depth: str, found: Scan) -> None:
    """Write the verdict (atomically) where every route reads it; the edges for a mirror of the
    whole history, whose next scan reads only the new commits."""
    if depth == "all":
        _write(git_dir / EDGES_FILE, "".join(f"{old} {new}\n" for old, new in found.edges), packed=True)
    stale = WINDOW_FILE if depth == "all" else EDGES_FILE  # of the other kind of scan, if any
    with contextlib.suppress(OSError):
        (git_dir / stale).unlink()
    header = f"{_FORMAT} {tip} {depth} {found.rules}"
    lines = [header, *(f"{sha} {why}" for sha, why in sorted(found.verdict.items()))]
    _write(git_dir / SECRET_BLOBS_FILE, "\n".join(lines) + "\n")


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


def _entries(chunks: Iterable[bytes], names: set[str], settings: Settings) -> list[tuple[str, str]]:
    """Read `git log --raw -z` entries: blobs under a secret name go into `names`; the descent
    edges (old blob -> new blob of a rename, copy, modification or type change) are returned."""
    edges: list[tuple[str, str]] = []
    pending = b""
    head: list[str] | None = None
    paths: list[str] = []
    for chunk in chunks:
        tokens = (pending + chunk).split(b"\0")
        pending = tokens.pop()
        for token in tokens:
            if head is not None:
                paths.append(os.fsdecode(token))
                if len(paths) < (2 if head[4][:1] in ("R", "C") else 1):
                    continue
                _entry(head, paths, names, edges, settings)
                head, paths = None, []
            elif token.lstrip(b"\n").startswith(b":"):
                fields = token.lstrip(b"\n")[1:].decode("ascii", "replace").split()
                head = fields if len(fields) == 5 else None
    return edges


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
    git_dir: Path, tip: str, timeout: float, settings: Settings, detect: list[str]
) -> tuple[set[str], list[tuple[str, str]]]:
    """The names and descent edges of a windowed mirror's commits, each commit read from git once:
    what a commit contributes depends on the commit alone, so it is kept (WINDOW_FILE) while the
    commit is in the window, and a refresh reads only the new commits. The commits at the
    shallow edge are left out: git shows them as if every file were added, and every name they
    hold is already in the seed from the whole branch (`lineage.git`), which a windowed scan
    always gets; so the verdict is the one a full rescan of the window gives."""
    key = " ".join([_rules(settings), *detect])
    kept = _read_window(git_dir, key)
    with GitProcess(git_dir, ["rev-list", tip], timeout, 1 << 40) as proc:
        commits = b"".join(proc.chunks()).decode("ascii").split()
        proc.finish()
    try:
        edge = set((git_dir / "shallow").read_text(encoding="ascii").split())
    except FileNotFoundError:
        edge = set()
    wanted = [commit for commit in commits if commit not in edge]
    todo = [commit for commit in wanted if commit not in kept]
    if todo:
        args = ["log", "--no-mailmap", "--raw", "--no-abbrev", *detect, "-m", "-z", "--format=%x1e%H",
                "--no-walk=unsorted", "--stdin"]  # fmt: skip
        found = _entries_by_commit(git_dir, args, "".join(f"{c}\n" for c in todo), timeout, settings)
        kept.update({commit: found.get(commit, (set(), [])) for commit in todo})
    window = {commit: kept[commit] for commit in wanted}
    _write(git_dir / WINDOW_FILE, "\n".join([key, *_window_lines(window)]) + "\n", packed=True)
    names: set[str] = set()
    edges: list[tuple[str, str]] = []
    for commit_names, commit_edges in window.values():
        names.update(commit_names)
        edges += commit_edges
    return names, edges


def _entries_by_commit(
    git_dir: Path, args: list[str], stdin: str, timeout: float, settings: Settings
) -> dict[str, tuple[set[str], list[tuple[str, str]]]]:
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), "--no-pager", *args],
        input=stdin.encode("ascii"),
        capture_output=True,
        timeout=timeout,
        env=read_env(),
    )
    if done.returncode != 0:
        raise GitReadError(f"git log failed: {done.stderr.decode('utf-8', 'replace').strip()[-300:]}")
    found: dict[str, tuple[set[str], list[tuple[str, str]]]] = {}
    for part in done.stdout.split(b"\x1e")[1:]:
        commit, _, rest = part.partition(b"\0")
        names, edges = found.setdefault(commit.decode("ascii").strip(), (set(), []))
        edges += _entries([rest], names, settings)
    return found


def _window_lines(window: Mapping[str, tuple[set[str], list[tuple[str, str]]]]) -> Iterator[str]:
    for commit, (names, edges) in window.items():
        yield f"{commit} " + " ".join([*sorted(names), *(f"{old}>{new}" for old, new in edges)])


def _read_window(git_dir: Path, key: str) -> dict[str, tuple[set[str], list[tuple[str, str]]]]:
    lines = (_read_text(git_dir / WINDOW_FILE) or "").split("\n")
    if lines[0] != key:
        return {}
    kept: dict[str, tuple[set[str], list[tuple[str, str]]]] = {}
    for line in lines[1:]:
        commit, *items = line.split(" ")
        if len(commit) == 40:
            names = {item for item in items if len(item) == 40}
            edges = [(item[:40], item[41:]) for item in items if len(item) == 81]
            kept[commit] = (names, edges)
    return kept


def _closure(known: Mapping[str, str], edges: list[tuple[str, str]]) -> dict[str, str]:
    """Every blob known secret, and every blob reachable from one along descent edges."""
    following: defaultdict[str, list[str]] = defaultdict(list)
    for old, new in edges:
        following[old].append(new)
    verdict = dict(known)
    todo = list(known)
    while todo:
        for new in following.get(todo.pop(), ()):
            if new not in verdict:
                verdict[new] = DESCENT
                todo.append(new)
    return verdict


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


# --- files ---------------------------------------------------------------------------------------


def _stamp(git_dir: Path) -> int:
    try:
        return (git_dir / SECRET_BLOBS_FILE).stat().st_mtime_ns
    except OSError:
        return 0


def _read_edges(git_dir: Path) -> list[tuple[str, str]] | None:
    """The descent edges the last whole-history scan saw; None when they cannot be read (then
    the scan is not incremental: the verdict never rests on edges it lost)."""
    text = _read_text(git_dir / EDGES_FILE)
    if text is None:
        return None
    return [(line[:40], line[41:81]) for line in text.split("\n") if len(line) == 81]


def _read_text(path: Path) -> str | None:
    """A record as written by _write, compressed or (from before) plain; None when missing,
    damaged or not ASCII."""
    try:
        data = path.read_bytes()
        return (gzip.decompress(data) if data[:2] == _GZIP_MAGIC else data).decode("ascii")
    except (OSError, EOFError, UnicodeDecodeError, zlib.error, gzip.BadGzipFile):
        return None


def _write(path: Path, text: str, packed: bool = False) -> None:
    """Atomically. `packed`: gzip, for the records of 40-hex shas that repeat (a third the size:
    gitleaks/gitleaks's 0.4 MB of edges to 0.13 MB); the verdict stays plain text."""
    data = text.encode("ascii")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(gzip.compress(data, compresslevel=6, mtime=0) if packed else data)
    os.replace(tmp, path)
