"""Secret redaction: one linear-time engine for stored files and for everything shown.

It lives with the repos (the lowest layer that needs it: blobs are redacted when a snapshot is
made); worker/tools/redact.py applies it to every tool result.

Every file of a snapshot is redacted once, at rest, when its git blob is processed
(worker/repos/blob_worker.py): the tools then read redacted text only, so `search` cannot match
a secret and `read_file` pays nothing per call. The same engine is also the last step of every
tool result (`finish`), and redacts questions, thread history, progress lines and answers:
defence in depth, cheap enough to run on everything.

A whole file (`redact_bytes(…, whole_file=True)`, the blob processor's call) that is a
configuration file also has its values judged as config values (worker/repos/secrets/config_values.py):
a secret-named key's value withheld whatever its entropy, an unnamed key's random token withheld.

`Redactor.redact(text)` is the entry point for arbitrary text (history tools, logs, anything
new): it returns the text with each secret replaced by `[REDACTED:<kind>]` and never changes
the number of lines, so a file can be redacted whole and still be sliced by line number.

**Linear time.** Every rule is an RE2 regex (worker/repos/secrets/secret_rules.py), and RE2 runs in
time linear in its input whatever the pattern and the text. One RE2 set of the rules' literal
keywords finds which rules can match at all (a set of literals compiles to a small automaton),
then only those rules run, once each, over the whole text, or, for rules declared line-bounded
(`Rule.lines_after`), over the lines holding their keywords only (worker/repos/secrets/keyword_lines.py:
the same matches, a fraction of the bytes); private-key blocks are found by one pass over the
BEGIN/END markers. Around that, the Python code touches each span a constant
number of times. So the cost of a text is O(length × rules that can match), with no input able
to make it quadratic: a 300 kB line of `eyJeyJeyJ…` takes milliseconds.
"""

from __future__ import annotations

import bisect
import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import re2

from worker.repos.secrets.config_values import ConfigValues
from worker.repos.secrets.detect_secrets_rules import plugin_rules
from worker.repos.secrets.gitleaks_rules import GENERIC_KINDS, gitleaks_rules
from worker.repos.secrets.keyword_lines import KeywordLines
from worker.repos.secrets.secret_blocks import SecretBlocks
from worker.repos.secrets.secret_filters import VALUE_CHECKS, SecretFilter, compile_allowlist
from worker.repos.secrets.secret_rules import FIRST_GROUP, OWN_RULES, Rule

# Bump when what the engine redacts changes outside its rules (the block passes, the merging):
# stored blobs are then processed anew (blobstore.generation).
ENGINE_REVISION = "3"
PRIVATE_KEY_MARKER = b"[REDACTED:private-key]"
_MARKER_PREFIX = b"[REDACTED:"
# A key block is a few KB at most: a BEGIN with no END within this many lines is redacted up to
# the first line that does not look like key material.
_MAX_KEY_LINES = 200
_BEGIN = rb"(?i)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
_END = rb"(?i)-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
# A line of a key body in any quoting: `MIIEow…`, `b"MIIE…"`, `'MIIE…' +`, `"MIIE…\n",`.
_KEY_BODY_LINE = rb"""^\s*(?:[bBrRuU]{0,2}["'`])?[A-Za-z0-9+/=]{8,}(?:\\n)?["'`]?\s*[,;+)\\]?\s*$"""
_KEY_HEADER_LINE = rb"^\s*[\"']?[A-Za-z-]+: \S"  # "Proc-Type: 4,ENCRYPTED" inside a block
_PUTTY = rb"(?m)^Private-Lines: *\d+"
_TOKEN_TAIL = rb"[A-Za-z0-9_+/=-]*"  # a match glued to more token characters is one token

# Markers of rules that find secrets by where they stand (a key name, a URL), not by their shape:
# when a shaped rule finds the same secret, its kind is the one shown.
_GENERIC_MARKERS = {
    f"[REDACTED:{kind}]".encode()
    for kind in (
        "secret-assignment",
        "high-entropy-value",
        "url-secret",
        "authorization",
        "curl-credentials",
        "basic-auth-credentials",
        "ibm-cloud-iam-key",
        "ibm-cos-hmac-credentials",
        "softlayer-credentials",
        "cloudant-credentials",
        "terraform-sensitive",
        "kubernetes-secret",
        *GENERIC_KINDS,
    )
}


@dataclass(frozen=True)
class _Compiled:
    kind: bytes  # the marker to write
    regex: Any  # re2._Regexp
    keywords: frozenset[str]  # the rule runs only when one of them is in the text (none: always)
    check: Callable[[bytes], bool] | None
    group: int | None  # see Rule.group
    filter: SecretFilter | None  # gitleaks' entropy floor and allowlists
    lines: KeywordLines | None  # where it can match (Rule.lines_after); None: the whole text


_WHOLE_TEXT: tuple[tuple[int, int | None], ...] = ((0, None),)


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # a rule that does not compile is reported by us, not on stderr
    options.max_mem = 64 << 20  # room for the DFA of the longest rules before RE2 uses its NFA
    return options


def _compile(pattern: str) -> Any:
    return re2.compile("(?m)" + pattern, options=_options())


def _compiled(rule: Rule, lines: KeywordLines | None) -> _Compiled:
    secret_filter = None
    if rule.entropy or rule.allowlists:
        secret_filter = SecretFilter(rule.entropy, tuple(map(compile_allowlist, rule.allowlists)))
    return _Compiled(
        f"[REDACTED:{rule.kind}]".encode(),
        _compile(rule.pattern),
        frozenset(rule.keywords),
        VALUE_CHECKS[rule.check] if rule.check else None,
        rule.group,
        secret_filter,
        lines,
    )


@dataclass
class Redaction:
    """A redacted text and what was found in it."""

    data: bytes
    lines: int  # lines of the text (a last line without "\n" counts)
    secret_lines: int  # lines holding at least one redaction
    kinds: dict[str, int] = field(default_factory=dict)  # kind -> spans redacted


class Redactor:
    """Replaces secrets with `[REDACTED:<kind>]`; build once per process (see get_redactor)."""

    def __init__(self, rules: tuple[Rule, ...] | None = None, *, by_lines: bool = True) -> None:
        """`by_lines=False` runs every rule over the whole text: the reference the line windows
        are tested against (tests/test_redaction_windows.py), same results, slower."""
        if rules is None:
            extra, _refused = plugin_rules()
            rules = (*OWN_RULES, *extra, *gitleaks_rules())
        self.rules = rules
        # One finder per line bound, over the keywords of every rule with that bound: one pass per
        # text finds the lines of all of them (a rule that also searches lines holding another
        # rule's keyword still searches every line holding one of its own).
        bounded: dict[int, set[str]] = {}
        for rule in rules:
            if by_lines and rule.lines_after is not None:
                bounded.setdefault(rule.lines_after, set()).update(rule.keywords)
        finders = {after: KeywordLines(tuple(sorted(words)), after) for after, words in bounded.items()}
        self._compiled = [
            _compiled(rule, None if rule.lines_after is None else finders.get(rule.lines_after))
            for rule in rules
        ]
        # Which kind a marker shows when rules of several kinds found one secret: ours and
        # detect-secrets' by shape (0), then gitleaks' by shape (1), then any found by where it
        # stands, a key name or a URL (2), gitleaks' generic rule last (3).
        gitleaks_kinds = {f"[REDACTED:{rule.kind}]".encode() for rule in gitleaks_rules()}
        self._rank = {c.kind: 1 if c.kind in gitleaks_kinds else 0 for c in self._compiled}
        self._rank.update(dict.fromkeys(_GENERIC_MARKERS, 2))
        self._rank.update({f"[REDACTED:{kind}]".encode(): 3 for kind in GENERIC_KINDS})  # least specific
        self._blocks = SecretBlocks()
        self._config = ConfigValues()
        keywords = sorted(
            {k for rule in rules for k in rule.keywords}
            | {"private key", "private-lines"}
            | set(self._blocks.keywords)
        )
        self._keywords = keywords
        options = _options()
        options.case_sensitive = False
        self._keyword_set = re2.Set.SearchSet(options)
        for keyword in keywords:
            self._keyword_set.Add(re2.escape(keyword))
        self._keyword_set.Compile()
        self._begin = re2.compile(_BEGIN, options=_options())
        self._end = re2.compile(_END, options=_options())
        self._putty = re2.compile(_PUTTY, options=_options())
        self._tail = re2.compile(_TOKEN_TAIL, options=_options())
        self._key_body_line = re2.compile(_KEY_BODY_LINE, options=_options())
        self._key_header_line = re2.compile(_KEY_HEADER_LINE, options=_options())

    # --- public API ------------------------------------------------------------------------

    def redact(self, text: str) -> str:
        """`text` with every secret replaced; the same number of lines."""
        if not text:
            return text
        data = text.encode("utf-8", "surrogatepass")
        redacted = self.redact_bytes(data).data
        if redacted is data:
            return text
        try:
            return redacted.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:  # a span cut through a lone surrogate's bytes
            return redacted.decode("utf-8", "replace")

    def redact_bytes(self, data: bytes, *, whole_file: bool = False) -> Redaction:
        """Redact UTF-8 text given as bytes; returns the result and what was found.

        `whole_file`: the text is a whole file (a blob being processed), so when it is a
        configuration file its values are judged as config values (worker/repos/secrets/config_values.py).
        Other texts (tool output, questions) are a mix of things and never a config file."""
        present = {self._keywords[i] for i in (self._keyword_set.Match(data) or ())}
        spans: list[tuple[int, int, bytes]] = self._config.spans(data) if whole_file else []
        if "private key" in present:
            spans += self._key_blocks(data)
        if "private-lines" in present:
            spans += self._putty_blocks(data)
        if not present.isdisjoint(self._blocks.keywords):
            spans += self._blocks.spans(data)
        windows: dict[int, list[tuple[int, int]]] = {}  # per KeywordLines, found once per text
        for rule in self._compiled:
            if rule.keywords and present.isdisjoint(rule.keywords):
                continue
            if rule.lines is None:
                spans += self._matches(rule, data)
                continue
            if id(rule.lines) not in windows:
                windows[id(rule.lines)] = rule.lines.windows(data)
            spans += self._matches(rule, data, windows[id(rule.lines)])
        lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        if not spans:
            return Redaction(data, lines, 0)
        return self._apply(data, spans, lines)

    # --- finding ---------------------------------------------------------------------------

    def _matches(
        self, rule: _Compiled, data: bytes, windows: Sequence[tuple[int, int | None]] = _WHOLE_TEXT
    ) -> list[tuple[int, int, bytes]]:
        found = []
        for match in (m for pos, endpos in windows for m in rule.regex.finditer(data, pos, endpos)):
            groups = [g for g in range(1, rule.regex.groups + 1) if match.start(g) >= 0]
            if rule.group is None:
                best = max(groups, key=lambda g: match.end(g) - match.start(g), default=0)
                if best and match.start(best) == match.start():
                    best = 0  # a group at the very start is a type prefix ("ghp"), not the value
            elif rule.group == FIRST_GROUP:
                # gitleaks: the first group that took part, when it is the token the match ends
                # with (`key = "<group>"`) or starts with; a group in the middle of a URL or a
                # manifest is a piece of it, and the whole match is the secret.
                best = groups[0] if groups else 0
                if best and match.end() - match.end(best) > 4 and match.start(best) != match.start():
                    best = 0
            else:
                best = rule.group if match.start(rule.group) >= 0 else 0
            start, end = match.span(best)
            if rule.filter is not None and not rule.filter.keeps(data, match.span(), (start, end)):
                continue
            if rule.check is not None:
                value = data[start:end]
                trimmed = value.rstrip(b",;")  # code punctuation after an unquoted value
                if not rule.check(trimmed):
                    continue
                end = start + len(trimmed)
            if end > start:
                found.append((start, end, rule.kind))
        return found

    def _key_blocks(self, data: bytes) -> list[tuple[int, int, bytes]]:
        """Spans (one per line) of each private-key block: BEGIN, body lines in any quoting, END."""
        end_spans = {m.start(): m.end() for m in self._end.finditer(data)}
        ends = sorted(end_spans)
        line_starts = _LineIndex(data)
        spans: list[tuple[int, int, bytes]] = []
        covered = -1
        for begin in self._begin.finditer(data):
            start = begin.start()
            if start < covered:
                continue
            first_line = line_starts.line_of(start)
            at = bisect.bisect_left(ends, begin.end())
            end_pos = ends[at] if at < len(ends) else None
            if end_pos is not None and line_starts.line_of(end_pos) - first_line <= _MAX_KEY_LINES:
                stop = end_spans[end_pos]
            else:
                stop = self._open_block_end(data, line_starts, first_line)
            spans += line_starts.per_line(start, stop, PRIVATE_KEY_MARKER)
            covered = stop
        return spans

    def _open_block_end(self, data: bytes, lines: _LineIndex, first: int) -> int:
        """Where a BEGIN without its END stops: the last following line that looks like key material."""
        stop = lines.end_of(first)
        for number in range(first + 1, min(first + 1 + _MAX_KEY_LINES, lines.count)):
            line = data[lines.start_of(number) : lines.end_of(number)]
            if not line.strip():
                continue
            if not (self._key_body_line.match(line) or self._key_header_line.match(line)):
                break
            stop = lines.end_of(number)
        return stop

    def _putty_blocks(self, data: bytes) -> list[tuple[int, int, bytes]]:
        """A PuTTY key file's private lines: `Private-Lines: N` and the N lines after it."""
        spans: list[tuple[int, int, bytes]] = []
        lines = _LineIndex(data)
        for match in self._putty.finditer(data):
            count = int(match.group(0).rsplit(b":", 1)[1])
            first = lines.line_of(match.start()) + 1
            last = min(first + min(count, _MAX_KEY_LINES), lines.count) - 1
            if last >= first:
                spans += lines.per_line(lines.start_of(first), lines.end_of(last), PRIVATE_KEY_MARKER)
        return spans

    # --- replacing -------------------------------------------------------------------------

    def _token_end(self, data: bytes, end: int) -> int:
        tail = self._tail.match(data, end)
        return tail.end() if tail else end

    def _apply(self, data: bytes, spans: list[tuple[int, int, bytes]], lines: int) -> Redaction:
        """Replace the spans (merged, each extended over the token it is glued to, split at line
        breaks so no line disappears) with their markers."""
        spans.sort()
        merged: list[list[Any]] = []
        rank = self._rank
        for start, end, kind in spans:
            if merged and start >= merged[-1][1]:
                # Extend the previous span over its token; a span inside that token joins it.
                merged[-1][1] = self._token_end(data, merged[-1][1])
            if merged and start < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
                if rank.get(kind, 1) < rank.get(merged[-1][2], 1):
                    merged[-1][2] = kind  # "github-token" says more than "secret-assignment"
                continue
            merged.append([start, end, kind])
        if merged:
            merged[-1][1] = self._token_end(data, merged[-1][1])
        pieces: list[bytes] = []
        kinds: dict[str, int] = {}
        secret_lines: set[int] = set()
        index = _LineIndex(data)
        last = 0
        for start, end, kind in merged:
            pieces.append(data[last:start])
            chunk = data[start:end]
            # A span never swallows a line break: each line of it gets its own marker.
            pieces.append(b"\n".join(kind if part else b"" for part in chunk.split(b"\n")))
            last = end
            name = kind[len(_MARKER_PREFIX) : -1].decode()
            kinds[name] = kinds.get(name, 0) + 1
            secret_lines.update(range(index.line_of(start), index.line_of(max(start, end - 1)) + 1))
        pieces.append(data[last:])
        return Redaction(b"".join(pieces), lines, len(secret_lines), kinds)


class _LineIndex:
    """Line numbers (0-based) of offsets in a text, by binary search over its line starts."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.starts = [0]
        at = data.find(b"\n")
        while at != -1:
            self.starts.append(at + 1)
            at = data.find(b"\n", at + 1)
        self.count = len(self.starts)

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1

    def start_of(self, line: int) -> int:
        return self.starts[line]

    def end_of(self, line: int) -> int:
        """The offset of the line's "\n" (or the text's end)."""
        return self.starts[line + 1] - 1 if line + 1 < self.count else len(self.data)

    def per_line(self, start: int, stop: int, marker: bytes) -> list[tuple[int, int, bytes]]:
        """The span [start, stop) cut at line breaks, leading indentation of each line kept."""
        spans = []
        for line in range(self.line_of(start), self.line_of(max(start, stop - 1)) + 1):
            begin = max(start, self.start_of(line))
            end = min(stop, self.end_of(line))
            if begin == self.start_of(line):
                content = self.data[begin:end]
                begin += len(content) - len(content.lstrip())
            if end > begin:
                spans.append((begin, end, marker))
        return spans


_BUILDING = threading.Lock()


def get_redactor() -> Redactor:
    """The process-wide Redactor: compiling the rules costs more than most redactions.

    Built once even when many threads ask first at once (a burst of Slack deliveries on the
    listener pool): lru_cache alone lets each of them build its own, ~0.5 s of CPU apiece. Once
    built, no lock is taken (a process forked while one was held would wait forever)."""
    if _build_redactor.cache_info().currsize:
        return _build_redactor()
    with _BUILDING:
        return _build_redactor()


@functools.lru_cache(maxsize=1)
def _build_redactor() -> Redactor:
    return Redactor()
