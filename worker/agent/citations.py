"""Check every citation in a model's answer before anything is posted.

A citation `[repo:path#L12-L30]` (or `#L12`) is verified when the repo is in scope, the file
exists in the snapshot, the lines exist, and every one of those lines was shown to the model
by a tool while answering this question. Citations of history are verified the same way: a
commit `[repo@sha]` when the commit exists in the repo's mirror and a tool (log, blame, show,
diff) showed it; lines of a file at a commit `[repo@sha:path#L12-L30]` when a tool showed
those lines of that file at that commit. Verified ones become links to the exact commit, in
the forge's own shapes (worker/agent/links.py); the others stay as plain text, and the reply
says how many could not be verified.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from worker.agent.links import commit_url, file_url
from worker.repos.git_objects import object_reader
from worker.repos.git_read import GitReadError
from worker.repos.history import read_commit
from worker.repos.snapshot import Snapshot
from worker.repos.visible import secret_path
from worker.tools.context import ToolContext, ToolError
from worker.tools.paths import resolve_path


@dataclass(frozen=True)
class Source:
    """One verified citation, as the reply shows it."""

    repo: str
    path: str
    start: int
    end: int
    url: str | None  # a link to the exact commit, or None when the repo has no web URL
    label: str  # what to show: `repo:path:12-30 @ abc1234`, or `repo@abc1234` for a commit
    commit: str | None = None  # the full sha of a history citation ([repo@sha] or [repo@sha:path#L..])


CITATION = re.compile(r"\[(?P<repo>[a-z0-9._-]+):(?P<path>[^\]\s#]+)#L(?P<start>\d+)(?:-L?(?P<end>\d+))?\]")
# [repo@sha] (a commit) or [repo@sha:path#L12-L30] (lines of a file at that commit).
HISTORY_CITATION = re.compile(
    r"\[(?P<hrepo>[a-z0-9._-]+)@(?P<sha>[0-9a-f]{7,40})"
    r"(?::(?P<hpath>[^\]\s#]+)#L(?P<hstart>\d+)(?:-L?(?P<hend>\d+))?)?\]"
)
_ANY_CITATION = re.compile(f"{HISTORY_CITATION.pattern}|{CITATION.pattern}")
# A citation the model already wrapped in a Markdown link: [[repo:path#L1]](url) — we relink it.
_PRELINKED = re.compile(
    r"\[(\[[a-z0-9._-]+(?::[^\]\s#]+#L\d+(?:-L?\d+)?|@[0-9a-f]{7,40}(?::[^\]\s#]+#L\d+(?:-L?\d+)?)?)\])\]"
    r"\([^)]*\)"
)
# A Markdown link whose text looks like a citation, in any spelling: [App:x.py#L1](url),
# [repo: x.py#L1-L3 ](url), [repo:x.py:1-3 @ abc1234](url). Only check_answer links citations,
# to the commit it verified: the link is dropped and its text is checked like any citation.
_MARKDOWN_LINK = re.compile(
    r"\[(?P<label>(?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]"
    r"\(\s*(?:<[^>\n]*>|[^()\s]*(?:\([^()\s]*\)[^()\s]*)*)(?:\s+\"[^\"\n]*\")?\s*\)"
)
_CITATION_LIKE = re.compile(
    r"[\w.-]+\s*:\s*[^\s:\]]+?(?:\s*#\s*L\s*\d|:\d)|[\w.-]+\s*@\s*[0-9a-f]{7,40}\b", re.IGNORECASE
)
# A line anchor with or without the `repo:` prefix ([retry.py#L3](url), [src/a.py#L1-L9](url)).
_LINE_ANCHOR = re.compile(r"#\s*L\s*\d", re.IGNORECASE)
MAX_CITED_LINES = 2000


@dataclass(frozen=True)
class Citation:
    text: str
    repo: str
    path: str  # "" for a commit
    start: int
    end: int
    sha: str | None = None  # the sha (or its first digits) of a history citation


def link(snapshot: Snapshot, path: str, start: int, end: int) -> str | None:
    """The commit-pinned web URL in the repo forge's own style, or None without a web URL."""
    return file_url(snapshot.repo, snapshot.sha, path, start, end)


def plain_label(snapshot: Snapshot, path: str, start: int, end: int, sha: str | None = None) -> str:
    lines = f"{start}" if start == end else f"{start}-{end}"
    return f"{snapshot.repo.name}:{path}:{lines} @ {(sha or snapshot.sha)[:7]}"


def _citation(match: re.Match[str]) -> Citation:
    if match.group("hrepo") is not None:
        start = int(match.group("hstart") or 0)
        end = int(match.group("hend") or start)
        return Citation(
            match.group(0), match.group("hrepo"), match.group("hpath") or "", start, end, match.group("sha")
        )
    start = int(match.group("start"))
    end = int(match.group("end") or start)
    return Citation(match.group(0), match.group("repo"), match.group("path"), start, end)


def find_citations(text: str) -> list[Citation]:
    return [_citation(match) for match in _ANY_CITATION.finditer(text)]


def _line_count(ctx: ToolContext, snapshot: Snapshot, path: str) -> int | None:
    cached = ctx.file_cache.get((snapshot.repo.name, path))
    if cached is not None:
        return len(cached)
    try:
        absolute, _ = resolve_path(snapshot, path, ctx.settings)
        if not absolute.is_file():
            return None
        with open(absolute, "rb") as handle:
            data = handle.read()
    except (ToolError, OSError):
        return None
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


def verify(ctx: ToolContext, citation: Citation) -> Source | None:
    snapshot = ctx.snapshots.get(citation.repo)
    if snapshot is not None and citation.sha is not None:
        if citation.path and snapshot.sha.startswith(citation.sha):  # the snapshot's own commit
            return verify(
                ctx, Citation(citation.text, citation.repo, citation.path, citation.start, citation.end)
            )
        return _verify_history(ctx, snapshot, citation)
    if snapshot is None or citation.start < 1 or citation.end < citation.start:
        return None
    if citation.end - citation.start > MAX_CITED_LINES:
        return None
    count = _line_count(ctx, snapshot, citation.path)
    if count is None or citation.end > count:
        return None
    if not ctx.shown.covers(citation.repo, citation.path, citation.start, citation.end):
        return None
    return Source(
        repo=citation.repo,
        path=citation.path,
        start=citation.start,
        end=citation.end,
        url=link(snapshot, citation.path, citation.start, citation.end),
        label=plain_label(snapshot, citation.path, citation.start, citation.end),
    )


def _verify_history(ctx: ToolContext, snapshot: Snapshot, citation: Citation) -> Source | None:
    """A commit a tool showed and the mirror holds; for a file at it, lines a tool showed there."""
    name = snapshot.repo.name
    sha = ctx.history.commit(name, citation.sha or "")
    if sha is None or snapshot.git_dir is None:
        return None
    try:
        reader = object_reader(snapshot.git_dir, ctx.settings.history_timeout_seconds)
        if read_commit(reader, sha, 4 << 20) is None:
            return None
    except GitReadError:
        return None
    if not citation.path:
        return Source(name, "", 0, 0, commit_url(snapshot.repo, sha), f"{name}@{sha[:7]}", sha)
    if citation.start < 1 or citation.end < citation.start or citation.end - citation.start > MAX_CITED_LINES:
        return None
    if secret_path(citation.path, ctx.settings) is not None:
        return None
    if not ctx.history.covers(name, sha, citation.path, citation.start, citation.end):
        return None
    return Source(
        repo=name,
        path=citation.path,
        start=citation.start,
        end=citation.end,
        url=file_url(snapshot.repo, sha, citation.path, citation.start, citation.end),
        label=plain_label(snapshot, citation.path, citation.start, citation.end, sha),
        commit=sha,
    )


@dataclass(frozen=True)
class CheckedAnswer:
    markdown: str
    sources: list[Source]
    unverified: int


def check_body(ctx: ToolContext, text: str) -> CheckedAnswer:
    """The answer's text with verified citations linked and the rest unlinked, without the
    closing Sources section (a streamed answer shows this as it is written)."""
    text = _MARKDOWN_LINK.sub(_unlink_citation_like, text)
    text = _unlink_other_citation_like(text)
    text = _PRELINKED.sub(lambda m: m.group(1), text)
    sources: dict[str, Source] = {}
    unverified = 0
    verdicts: dict[str, Source | None] = {}
    for citation in find_citations(text):
        if citation.text not in verdicts:
            verdicts[citation.text] = verify(ctx, citation)
            if verdicts[citation.text] is None:
                unverified += 1

    def replace(match: re.Match[str]) -> str:
        source = verdicts.get(match.group(0))
        if source is None:
            return f"`{match.group(0)[1:-1]}` (unverified)"
        sources.setdefault(source.label, source)
        return f"[{_shown(source)}]({source.url})" if source.url else f"`{source.label}`"

    body = _ANY_CITATION.sub(replace, text).rstrip()
    return CheckedAnswer(markdown=body, sources=list(sources.values()), unverified=unverified)


def check_answer(ctx: ToolContext, text: str) -> CheckedAnswer:
    """Link verified citations, unlink the rest, and close with a Sources section."""
    checked = check_body(ctx, text)
    closing = []
    if checked.sources:
        closing.append("**Sources**")
        for source in checked.sources:
            closing.append(f"- [{source.label}]({source.url})" if source.url else f"- `{source.label}`")
    unverified = checked.unverified
    if unverified:
        noun = "citation" if unverified == 1 else "citations"
        closing.append(
            f"_{unverified} {noun} could not be verified against the code read and {'is' if unverified == 1 else 'are'} not linked._"
        )
    markdown = checked.markdown + ("\n\n" + "\n".join(closing) if closing else "")
    return CheckedAnswer(markdown=markdown, sources=checked.sources, unverified=unverified)


def looks_like_citation(label: str) -> bool:
    """A link text a reader would take for a citation, also when it is spelled with fullwidth
    or zero-width characters or without the `repo:` prefix: only check_answer may link those."""
    seen = "".join(c for c in unicodedata.normalize("NFKC", label) if unicodedata.category(c) != "Cf")
    return bool(_CITATION_LIKE.search(seen) or _LINE_ANCHOR.search(seen))


def _unlink_citation_like(match: re.Match[str]) -> str:
    label = match.group("label").strip()
    if not looks_like_citation(label):
        return match.group(0)
    return label if label.startswith("[") and label.endswith("]") else f"[{label}]"


# A link reference definition ([1]: https://…): a look-alike [retry.py#L3] or [x][1] anywhere
# would link there. It shows nothing in rendered Markdown, so it is dropped.
_REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]\n]+\]:[ \t]*\S[^\n]*\n?", re.MULTILINE)


def _unlink_other_citation_like(text: str) -> str:
    """What _MARKDOWN_LINK does not see, as CommonMark links it: a label across lines or with
    brackets nested deeper, a target with parentheses nested deeper or a 'title'; and link
    reference definitions. Errs on the side of unlinking."""
    text = _REFERENCE_DEFINITION.sub("", text)
    out: list[str] = []
    done = 0
    at = text.find("](")
    while at != -1:
        start, end = _label_start(text, at), _target_end(text, at + 1)
        if start >= done and end != -1 and looks_like_citation(text[start + 1 : at]):
            label = text[start + 1 : at].strip()
            out += [
                text[done:start],
                label if label.startswith("[") and label.endswith("]") else f"[{label}]",
            ]
            done = end
            at = text.find("](", end)
        else:
            at = text.find("](", at + 2)
    return "".join(out) + text[done:]


def _label_start(text: str, close: int) -> int:
    """The `[` that the `]` at `close` closes (brackets balanced, within a paragraph), or -1."""
    depth = 0
    for index in range(close - 1, -1, -1):
        char = text[index]
        if char == "]":
            depth += 1
        elif char == "[":
            if depth == 0:
                return index
            depth -= 1
        elif char == "\n" and text[index - 1 : index] == "\n":
            return -1
    return -1


def _target_end(text: str, open_at: int) -> int:
    """Just past the `)` that closes the `(` at `open_at` (parentheses balanced), or -1."""
    depth = 0
    for index in range(open_at, len(text)):
        char = text[index]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index + 1
        elif char == "\n" and text[index + 1 : index + 2] == "\n":
            return -1
    return -1


def _shown(source: Source) -> str:
    """A verified citation as the answer shows it: as it was written, with its full line range."""
    lines = f"{source.start}" if source.start == source.end else f"{source.start}-L{source.end}"
    if source.commit is None:
        return f"{source.repo}:{source.path}#L{lines}"
    if not source.path:
        return f"{source.repo}@{source.commit[:7]}"
    return f"{source.repo}@{source.commit[:7]}:{source.path}#L{lines}"
