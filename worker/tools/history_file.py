"""Lines of one file as an earlier commit of the mirror has them, for what a question points at.

Not one of the model's tools: codebot calls it itself (worker/pointers/) when a stack trace
names the commit it ran at. Every rule of the history tools holds, as `show` and `diff` apply
them: the repo is in scope, the commit is one the snapshot's branch reaches (`resolve_ref`), the
path is checked as for any commit (no `..`, `.git` or secret file name), only a regular file's
blob is read (never a symlink's or a submodule's), and that blob is processed as a snapshot's
file is (`processed_versions`): a blob secret by lineage, or withheld by content, or binary, is
described, never shown; text is redacted as a whole. The lines shown are recorded as evidence
for `[repo@sha:path#Lx-Ly]` citations, which link to that commit.
"""

from __future__ import annotations

from pathlib import Path

from worker.repos.git_read import GitReadError, run_git
from worker.repos.history_content import processed_versions
from worker.repos.placeholders import TEXT
from worker.repos.visible import shown_name
from worker.tools.context import ToolContext, ToolError
from worker.tools.files import _numbered
from worker.tools.history_diff import _why_not_shown
from worker.tools.history_refs import SHORT, history_path, mirror, resolve_ref
from worker.tools.redact import finish
from worker.tools.registry import ToolResult
from worker.tools.visible_paths import redacts

REGULAR_MODES = (b"100644", b"100755")


def read_file_at(
    ctx: ToolContext, repo: str, path: str, commit: str, start_line: int = 1, end_line: int | None = None
) -> ToolResult:
    """Read lines of one file as commit `commit` of the repo has it, numbered.

    Args:
        repo: the repo's name
        path: the file's path relative to the repo root
        commit: a sha of the repo's history (7 to 40 hex digits), a tag, or the branch name
        start_line: first line to show, counting from 1
        end_line: last line to show (inclusive)
    """
    snapshot, git_dir, reader = mirror(ctx, repo)
    name = snapshot.repo.name
    found = resolve_ref(ctx, snapshot, git_dir, reader, commit, "commit")
    relative = history_path(ctx, path)
    if redacts(relative):  # a name with a secret in it is never looked up by its real spelling
        raise ToolError(f"{shown_name(relative)!r} cannot be read at another commit")
    blob = _blob_at(ctx, git_dir, found.sha, relative)
    version = processed_versions(reader, [blob], ctx.settings)[blob]
    why = _why_not_shown(version)
    if version.kind != TEXT or why is not None:
        raise ToolError(f"{shown_name(relative)!r} at commit {found.sha[:SHORT]}: {why}")
    total = len(version.lines)
    start = max(1, start_line)
    if total == 0 or start > total:
        raise ToolError(f"{shown_name(relative)!r} has {total} lines at commit {found.sha[:SHORT]}")
    last = total if end_line is None else max(start, min(end_line, total))
    shown, _records = _numbered(list(version.lines[start - 1 : last]), start, total, ctx.settings)
    last = start + len(shown) - 1
    ctx.history.add_lines(name, found.sha, relative, range(start, last + 1))
    if found.sha == snapshot.sha:  # the snapshot's own file (a tag at its commit): cited as its lines
        ctx.shown.add(name, relative, range(start, last + 1))
    header = f"{name}:{shown_name(relative)} lines {start}-{last} of {total}, at commit {found.sha[:SHORT]}"
    data = {"repo": name, "path": relative, "commit": found.sha, "start_line": start, "end_line": last}
    return finish(ctx, "\n".join([header, *shown]), data)


def _blob_at(ctx: ToolContext, git_dir: Path, sha: str, relative: str) -> str:
    """The blob of the regular file at `relative` in commit `sha` (git walks trees only: a
    symlinked folder on the way is no folder to it), or ToolError."""
    try:
        out = run_git(
            git_dir,
            ["--literal-pathspecs", "ls-tree", "-z", "--full-tree", sha, "--", relative],
            ctx.time_left(ctx.settings.history_timeout_seconds),
            1 << 16,
        )
    except GitReadError as exc:
        raise ToolError(f"git could not answer: {exc}") from None
    for entry in out.data.split(b"\0"):
        meta, _, entry_path = entry.partition(b"\t")
        fields = meta.split()
        if entry_path.decode("utf-8", "surrogateescape") != relative or len(fields) != 3:
            continue
        mode, kind, blob = fields
        if kind != b"blob" or mode not in REGULAR_MODES:
            raise ToolError(f"{shown_name(relative)!r} is not a regular file at commit {sha[:SHORT]}")
        return blob.decode("ascii")
    raise ToolError(f"{shown_name(relative)!r} does not exist at commit {sha[:SHORT]}")
