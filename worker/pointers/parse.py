"""Pointers in what someone wrote: links to lines of a repo's forge, and stack-trace frames.

Pure functions over text: nothing here reads a repo or knows which repos exist. Links are
parsed against one repo's web URL and forge at a time (the inverse of worker/agent/links.py);
frames give a path as the trace wrote it, a line and a symbol. The text is hostile: it is
cut to `MAX_TEXT_CHARS`, lines to `MAX_LINE_CHARS`, every pattern is bounded, and at most
`MAX_FOUND` links or frames are kept, so no input makes this slow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

MAX_TEXT_CHARS = 200_000  # a question is far shorter; a pasted log may not be
MAX_LINE_CHARS = 2_000  # no frame or link is longer: longer lines are cut before matching
MAX_FOUND = 200  # links, or frames, kept from one text before dedup and ranking

BLOB, COMMIT, COMPARE = "blob", "commit", "compare"


@dataclass(frozen=True)
class LinkTarget:
    """What a link into a repo's forge points at."""

    kind: str  # BLOB (lines of a file), COMMIT, COMPARE
    ref: str = ""  # the commit, branch or tag the link names ("" for Bitbucket Server without ?at=)
    path: str = ""  # BLOB: the file, "/"-separated, relative to the repo root
    start: int = 0  # BLOB: first line (0: none named)
    end: int = 0
    base: str = ""  # COMPARE: the older side


@dataclass(frozen=True)
class Frame:
    """One stack-trace frame as written."""

    path: str  # as the trace wrote it, "/"-separated (Java/Kotlin: package path + file name)
    line: int
    symbol: str
    language: str
    library: bool  # a third-party or runtime frame (site-packages, node_modules, java.*, ...)


URL = re.compile(r"https?://[^\s<>()\[\]{}\"'`|]{1,1500}")
_SHA = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{7,40}(?![0-9A-Za-z])")
_HEX_SHA = re.compile(r"[0-9a-f]{7,40}")


def _lines(text: str) -> list[str]:
    return [line[:MAX_LINE_CHARS] for line in text[:MAX_TEXT_CHARS].splitlines()]


def find_urls(text: str) -> list[str]:
    """The http(s) URLs in `text`, in order, without duplicates, at most MAX_FOUND."""
    found: list[str] = []
    for line in _lines(text):
        for match in URL.finditer(line):
            url = match.group(0).rstrip(".,;:!?*_~>")  # sentence punctuation, Markdown emphasis
            if url not in found:
                found.append(url)
                if len(found) >= MAX_FOUND:
                    return found
    return found


def find_commits(text: str) -> list[str]:
    """Hex words that may be commit shas (7-40 lower-case hex digits, with a letter and a digit)."""
    found: list[str] = []
    for line in _lines(text):
        for match in _SHA.finditer(line):
            word = match.group(0)
            if re.search(r"[a-f]", word) and re.search(r"\d", word) and word not in found:
                found.append(word)
                if len(found) >= 20:
                    return found
    return found


# A version a trace or log names: `v1.4.2`, or `version 1.4.2` / `release 1.4` / `build 1.4.2`.
_VERSION = re.compile(
    r"(?<![\w.])(?:v(?P<tagged>\d{1,6}(?:\.\d{1,6}){1,3})"
    r"|(?:version|release|build)[ :=]{1,3}v?(?P<named>\d{1,6}(?:\.\d{1,6}){1,3}))(?![\w.])",
    re.IGNORECASE,
)


def find_versions(text: str) -> list[str]:
    """Tag names a version in `text` may have, in order: `v1.4.2` as written; `version 1.4.2` as
    `v1.4.2` then `1.4.2` (both spellings of a release tag are common). At most 20."""
    found: list[str] = []
    for line in _lines(text):
        for match in _VERSION.finditer(line):
            tagged, named = match.group("tagged"), match.group("named")
            for name in [f"v{tagged}"] if tagged else [f"v{named}", named]:
                if name not in found:
                    found.append(name)
                    if len(found) >= 20:
                        return found
    return found


# --- links -----------------------------------------------------------------------------------


def _clean_path(raw: str) -> str | None:
    """A repo-relative path from a URL's path part, or None when it is not one (`..`, empty)."""
    parts = [unquote(p) for p in raw.split("/") if p]
    if not parts or any(p in (".", "..") or "\x00" in p or "\\" in p for p in parts):
        return None
    return "/".join(parts)


def _line_range(fragment: str) -> tuple[int, int]:
    """`L40-L60`, `L40C3-L60C9`, `L40-60`, `L40`, `lines-40:60`, `lines-40`, `40-60`, `40` → (start,
    end); (0, 0) else."""
    match = re.fullmatch(
        r"(?:L|lines-)?(\d{1,7})(?:C\d{1,7})?(?:(?:-L?|:)(\d{1,7})(?:C\d{1,7})?)?(?:[,:].*)?", fragment
    )
    if not match:
        return 0, 0
    start = int(match.group(1))
    end = int(match.group(2) or start)
    if start < 1:
        return 0, 0
    return (start, end) if end >= start else (start, start)


def _split_ref(rest: str, branch: str | None) -> tuple[str, str]:
    """`<ref>/<path>` → (ref, path); a branch name with slashes is recognised when it is the repo's."""
    if branch and rest.startswith(branch + "/"):
        return branch, rest[len(branch) + 1 :]
    ref, _, path = rest.partition("/")
    return unquote(ref), path


def _compare(spec: str) -> LinkTarget | None:
    for separator in ("...", "..", "%0D", "%0d", "\r"):
        if separator in spec:
            base, _, head = spec.partition(separator)
            if base and head:
                return LinkTarget(COMPARE, ref=unquote(head), base=unquote(base))
    return None


def parse_link(url: str, web_url: str, forge: str | None, branch: str | None = None) -> LinkTarget | None:
    """What `url` points at in the repo whose web URL is `web_url`, or None when it is not a
    link into that repo in a shape its forge serves (blob with lines, commit, compare)."""
    try:
        parts, web = urlsplit(url), urlsplit(web_url)
        if (parts.hostname or "").lower() != (web.hostname or "").lower() or parts.port != web.port:
            return None
    except ValueError:  # a port that is not a number, a broken IPv6 host
        return None
    base = web.path.rstrip("/")
    if not base or not (parts.path == base or parts.path.startswith(base + "/")):
        return None
    rest = parts.path[len(base) :].strip("/")
    rest = rest.removeprefix("-/")  # GitLab's separator; its older links omit it
    fragment = parts.fragment
    head, _, tail = rest.partition("/")
    if head in ("commit", "commits") and _HEX_SHA.fullmatch(tail.strip("/").lower()):
        return LinkTarget(COMMIT, ref=tail.strip("/").lower())
    if head == "compare" or (head == "branches" and tail.startswith("compare/")):
        if tail.split("/")[-1] in ("diff", "commits"):  # Bitbucket Server: ?sourceBranch=&targetBranch=
            query = parse_qs(parts.query)
            source, target = query.get("sourceBranch", [""])[0], query.get("targetBranch", [""])[0]
            return LinkTarget(COMPARE, ref=source, base=target) if source and target else None
        return _compare(tail.removeprefix("compare/"))
    if forge == "bitbucket" and head == "browse":  # Bitbucket Server: /browse/<path>?at=<ref>#40-60
        path = _clean_path(tail)
        ref = parse_qs(parts.query).get("at", [""])[0].removeprefix("refs/heads/")
        return _blob(ref, path, fragment)
    if head in ("blob", "blame", "raw") or (head == "src" and forge == "bitbucket"):
        ref, path = _split_ref(tail, branch)
        return _blob(ref, _clean_path(path), fragment)
    if head == "src" and forge in ("gitea", "forgejo", None):  # /src/{commit,branch,tag}/<ref>/<path>
        kind, _, after = tail.partition("/")
        if kind in ("commit", "branch", "tag"):
            ref, path = _split_ref(after, branch)
            return _blob(ref, _clean_path(path), fragment)
    return None


def _blob(ref: str, path: str | None, fragment: str) -> LinkTarget | None:
    if path is None:
        return None
    start, end = _line_range(fragment)
    return LinkTarget(BLOB, ref=ref, path=path, start=start, end=end)


# --- stack-trace frames ------------------------------------------------------------------------

_FRAME_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("python", re.compile(r'File "(?P<path>[^"]{1,500})", line (?P<line>\d{1,7})(?:, in (?P<sym>[^\s]{1,200}))?')),
    ("java", re.compile(
        r"\bat (?:[\w.$/@-]{1,200}/)?(?P<sym>[\w$.<>-]{1,300})\((?P<file>[\w$-]{1,200}\.(?:java|kt|kts|scala|groovy)):(?P<line>\d{1,7})\)"
    )),
    ("csharp", re.compile(r"\bat (?P<sym>[^\s(]{1,300})\([^)\n]{0,500}\) in (?P<path>[^\n]{1,500}?\.cs):line (?P<line>\d{1,7})")),
    ("javascript", re.compile(
        r"\bat (?:(?P<sym>[^\s(]{1,300}) \()?(?P<path>[^\s()]{1,500}?\.(?:[cm]?[jt]sx?|vue|svelte)):(?P<line>\d{1,7}):\d{1,7}\)?"
    )),
    ("rust", re.compile(r"(?:\bat |panicked at )(?P<path>[^\s:]{1,500}\.rs):(?P<line>\d{1,7})(?::\d{1,7})?")),
    ("go", re.compile(r"^\s*(?P<path>[^\s:]{1,500}\.go):(?P<line>\d{1,7})(?:\s+\+0x[0-9a-f]{1,16})?\s*$")),
    ("ruby", re.compile(r"(?P<path>[^\s:'\"`]{1,500}\.rb):(?P<line>\d{1,7}):in [`'](?P<sym>[^'`\n]{1,200})'")),
    ("php", re.compile(r"(?:#\d{1,6} |\bin )(?P<path>[^\s(]{1,500}\.php)(?:\((?P<line>\d{1,7})\)|:(?P<line2>\d{1,7})| on line (?P<line3>\d{1,7}))")),
)  # fmt: skip

# Where a frame is a library's or the runtime's, not the application's.
_LIBRARY = re.compile(
    r"(?:^|/)(?:site-packages|dist-packages|node_modules|vendor|gems|\.cargo|rustc|go/pkg/mod|"
    r"usr/lib|usr/local/lib|usr/local/go|lib/python\d[\d.]*|internal/modules|node:internal)(?:/|$)"
    r"|^<|^node:|^(?:java|javax|jdk|sun|kotlin|kotlinx|scala|android|dalvik|org/junit|System)/"
)


def _java_path(symbol: str, file: str) -> str:
    """`com.acme.Retry$Inner.run` in `Retry.java` → `com/acme/Retry.java`: the package is the
    symbol's parts before the class (the first part that starts with an upper-case letter)."""
    parts = symbol.split(".")
    package: list[str] = []
    for part in parts[:-1]:
        if part[:1].isupper():
            break
        package.append(part)
    return "/".join([*package, file])


def _normal_path(raw: str) -> str:
    path = raw.strip().removeprefix("file://").replace("\\", "/")
    path = re.sub(r"^[A-Za-z]:/", "/", path)  # a Windows drive
    path = re.sub(r"^webpack:/+(?:[^/]*/)?", "", path)
    return re.sub(r"\?.*$", "", path)


def _frame(language: str, match: re.Match[str]) -> Frame | None:
    groups = match.groupdict()
    number = groups.get("line") or groups.get("line2") or groups.get("line3")
    if not number or int(number) < 1:
        return None
    symbol = groups.get("sym") or ""
    path = _java_path(symbol, groups["file"]) if language == "java" else _normal_path(groups["path"])
    if not path or path.endswith("/"):
        return None
    return Frame(path, int(number), symbol, language, bool(_LIBRARY.search(path.lstrip("/"))))


def find_frames(text: str) -> list[Frame]:
    """Stack-trace frames in `text`, in order, without duplicates, at most MAX_FOUND."""
    found: list[Frame] = []
    seen: set[tuple[str, int]] = set()
    for line in _lines(text):
        for language, pattern in _FRAME_PATTERNS:
            match = pattern.search(line)
            if match is None:
                continue
            frame = _frame(language, match)
            if frame is not None and (frame.path, frame.line) not in seen:
                seen.add((frame.path, frame.line))
                found.append(frame)
                if len(found) >= MAX_FOUND:
                    return found
            break  # one frame per line: the first language whose shape matches
    return found


def ranked_frames(frames: list[Frame], limit: int) -> list[Frame]:
    """At most `limit` frames: the application's first, then libraries', each in trace order."""
    return ([f for f in frames if not f.library] + [f for f in frames if f.library])[:limit]
