"""Values in configuration files: judged by the key they stand under and by their randomness.

Source code and configuration need different rules. In code, `token = request.token` is code and
gitleaks' entropy floor spares `password = get_password()`; in a configuration file (YAML, JSON,
TOML, INI, .properties, .env) every value is data. So in a text that *is* a configuration file,
judged by its content (a blob is processed from its bytes alone, never from a file name, which
differs between the trees that share it: worker/repos/blob_process.py):

- **a secret-named key** (`password`, `api_token`, `clientSecret`, `user.token`; the same key
  words as the `secret-assignment` rules, worker/repos/secrets/secret_rules.py) has its whole value
  withheld, whatever its entropy or shape (`hunter2 horse`, `letmein.now`, a block scalar),
  unless the value is plainly a placeholder (`is_placeholder`);
- **any other key** has its value withheld when it is one random-looking token (`high_entropy`):
  what gitleaks' generic-api-key rule and detect-secrets' HighEntropyString plugin judge, for
  keys that name no secret (`algolia: 8fJ2kq…`), with their known false positives spared
  (hashes under hash-named keys, UUIDs, public keys and certificates).

A text is a configuration file when it is JSON (starts with `{` or `[`), or when nearly every
line that is not blank or a comment is a line of one (`key: value`, `key = value`, `[section]`,
`- item`, `---`, a continuation of a block scalar, a multi-line string or array, a .properties
`\\` continuation): `looks_like_config`. Code fails that within its first lines (`import`,
`def f():`, `const x = …;`).

Linear: each line is looked at once (RE2, bounded per line); values are cut by hand, per line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from worker.repos.secrets.config_value_checks import (
    MIN_TOKEN_LENGTH,
    compile_re2,
    high_entropy,
    is_placeholder,
    names_a_secret,
)
from worker.repos.secrets.secret_rules import SECRET_KEY_PATTERN, SECRET_KEY_WORDS

SECRET_MARKER = b"[REDACTED:secret-assignment]"
# Every secret-named key holds one of these words (any case): a key without one needs no RE2 call.
_KEY_WORDS = re.compile(b"|".join(re.escape(word.encode()) for word in SECRET_KEY_WORDS), re.IGNORECASE)
ENTROPY_MARKER = b"[REDACTED:high-entropy-value]"
# At most one line in this many may be neither config nor blank nor a comment (a stray line of a
# template, a key with spaces): a config file stays one; code exceeds it within a few lines.
_UNKNOWN_LINE_SHARE = 50
_MAX_JUDGED_KEYS = 10_000  # bounds the memory of the keys' verdicts
_MAX_LINE = 4096  # longer lines are not key lines (minified code, data blobs)

# --- lines of a config file --------------------------------------------------------------------
# `key: value`, `key = value`, `KEY=value`, `export KEY=value`, `"key": value,`, `- key: value`.
# An unquoted key has no spaces; YAML's colon is followed by a space or the line's end.
# These run once per line, where google-re2's per-call overhead would be most of the cost, so
# they are Python regexes on one line of at most _MAX_LINE bytes, anchored, each piece taking a
# class the next cannot (no nested or adjacent ambiguous repeats): one attempt, linear in the line.
_KEY_LINE = re.compile(
    rb"([ \t]*)(?:-[ \t]+)?(?:export[ \t]+)?"
    rb"(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[A-Za-z0-9_$@<][A-Za-z0-9_.$@/<>\[\]-]*)"
    rb"[ \t]*([:=])([ \t]*)(.*)"
)
_SECTION = re.compile(rb"[ \t]*\[\[?[^\[\]]+\]\]?[ \t]*(?:[#;].*)?")
_STRUCTURE = re.compile(
    rb"[ \t]*(?:---.*|\.\.\.|[\[\]{}(),]{1,4}|\"(?:[^\"\\]|\\.)*\",?|-?[0-9][0-9.eE+-]*,?)[ \t]*"
)
_BLOCK_SCALAR = re.compile(rb"[|>][-+0-9]*[ \t]*(?:#.*)?")
_COMMENT_STARTS = (b"#", b";", b"!", b"//", b"<!--")
# JSON, over the whole text: the pairs whose key holds a secret's word, and those whose value is
# long enough to be judged by its randomness (the others cannot be withheld: not looked at).
_JSON_VALUE = rb"(?:\"((?:[^\"\\\n]|\\.){0,1000})\"|(-?[0-9][0-9.eE+-]{0,100}))"
_JSON_SECRET_PAIR = compile_re2(
    rb"\"((?:[^\"\\\n]|\\.){0,100}(?i:pass|pwd|pw|secret|token|key|cred|auth|dsn|conn|webhook|salt)"
    rb"(?:[^\"\\\n]|\\.){0,100})\"[ \t\r\n]*:[ \t\r\n]*" + _JSON_VALUE
)
_JSON_LONG_PAIR = compile_re2(
    rb"\"((?:[^\"\\\n]|\\.){0,200})\"[ \t\r\n]*:[ \t\r\n]*\"([A-Za-z0-9+/=_-]{20,1000})\""
)


@dataclass
class _Open:
    """A value spanning lines: a YAML block scalar, a TOML multi-line string or array."""

    kind: str  # "block", "string", "brackets" or "continued" (a .properties `\\` line)
    indent: int = 0  # block: the key line's indentation; lines deeper belong to the value
    closer: bytes = b""  # string: the closing quotes
    depth: int = 0  # brackets: how many are open
    secret: bool = False  # the value's lines are withheld


class ConfigValues:
    """Finds the values to withhold in a text that is a configuration file."""

    def __init__(self) -> None:
        self._secret_key = compile_re2(rb"(?i)^(?:" + SECRET_KEY_PATTERN.encode() + rb")$")
        # A file repeats its keys (`token:` under every user): each is judged once per process.
        self._judged_keys: dict[bytes, bool] = {}

    def is_secret_key(self, key: bytes) -> bool:
        """Does a key (a bare name, quoted, or a dotted path: `user.token`) name a secret?"""
        if not _KEY_WORDS.search(key):
            return False  # most keys
        known = self._judged_keys.get(key)
        if known is None:
            known = bool(self._secret_key.match(key.strip(b"\"'").rstrip(b"[]")))
            if len(self._judged_keys) < _MAX_JUDGED_KEYS:
                self._judged_keys[key] = known
        return known

    def spans(self, data: bytes) -> list[tuple[int, int, bytes]]:
        """The spans to withhold, or none when the text is not a configuration file."""
        return self.judge(data)[1]

    def judge(self, data: bytes) -> tuple[str | None, list[tuple[int, int, bytes]]]:
        """What the text is ("json", "lines" or None: not a config file) and the spans to withhold."""
        head = data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
        if head == b"{":
            return "json", self._json_spans(data)
        by_lines = self._line_spans(data)
        if by_lines is None and head == b"[":  # not `[section]` lines: a JSON array
            return "json", self._json_spans(data)
        return (None, []) if by_lines is None else ("lines", by_lines)

    def _json_spans(self, data: bytes) -> list[tuple[int, int, bytes]]:
        found: dict[int, tuple[int, int, bytes]] = {}
        for pattern in (_JSON_SECRET_PAIR, _JSON_LONG_PAIR):
            for pair in pattern.finditer(data):
                group = 2 if pair.start(2) >= 0 else 3
                start, end = pair.span(group)
                if start in found:
                    continue
                marker = self._verdict(pair.group(1), data[start:end])
                if marker:
                    found[start] = (start, end, marker)
        return sorted(found.values())

    def _verdict(self, key: bytes, value: bytes) -> bytes | None:
        if is_placeholder(value) or names_a_secret(value):
            return None
        if self.is_secret_key(key):
            return SECRET_MARKER
        return ENTROPY_MARKER if high_entropy(value, key) else None

    def _line_spans(self, data: bytes) -> list[tuple[int, int, bytes]] | None:
        """The spans, or None as soon as the text has too many lines no config file has."""
        allowed_unknown = data.count(b"\n") // _UNKNOWN_LINE_SHARE
        unknown = keys = 0
        spans: list[tuple[int, int, bytes]] = []
        open_value: _Open | None = None
        start = 0
        for raw in data.split(b"\n"):
            line = raw.rstrip(b"\r")
            content = line.lstrip(b" \t")
            if open_value is not None:
                open_value = self._continue(open_value, line, start, spans)
            elif not content or content.startswith(_COMMENT_STARTS):
                pass
            elif len(line) > _MAX_LINE:
                unknown += 1
            elif (key_line := _key_line(line)) is not None:
                keys += 1
                open_value = self._key_line(key_line, start, spans)
            elif content[:1] == b"-" and content[1:2] in (b"", b" ", b"\t"):
                open_value = self._item(line, start, spans)
            elif not (_SECTION.fullmatch(line) or _STRUCTURE.fullmatch(line)):
                unknown += 1
            if unknown > allowed_unknown:
                return None
            start += len(raw) + 1
        return spans if keys else None

    def _key_line(self, match: Any, offset: int, spans: list[tuple[int, int, bytes]]) -> _Open | None:
        indent = match.end(1) - match.start(1)
        key = match.group(2)
        secret = self.is_secret_key(key)
        return self._value(match.group(5), offset + match.start(5), indent, key, secret, spans)

    def _item(self, line: bytes, offset: int, spans: list[tuple[int, int, bytes]]) -> _Open | None:
        """A YAML list item `- value`: its value is judged as an unnamed key's."""
        indent = len(line) - len(line.lstrip(b" \t"))
        value = line[indent + 1 :].lstrip(b" \t")
        if not value:
            return None
        return self._value(value, offset + len(line) - len(value), indent, b"", False, spans)

    def _value(
        self,
        value: bytes,
        at: int,
        indent: int,
        key: bytes,
        secret: bool,
        spans: list[tuple[int, int, bytes]],
    ) -> _Open | None:
        """Withhold what a value on its key's line must; say how it goes on over the next lines."""
        text = value.rstrip()
        if (
            not secret
            and len(text) < MIN_TOKEN_LENGTH
            and text[:1] not in (b"|", b">", b"[", b"{", b"'", b'"')
        ):
            return None  # the common case: a short value of an ordinary key, nothing to judge
        if _BLOCK_SCALAR.fullmatch(text):
            return _Open("block", indent=indent, secret=secret)
        for quotes in (b'"""', b"'''"):
            if text.startswith(quotes) and (len(text) < 6 or not text.endswith(quotes)):
                if secret and len(text) > 3:
                    spans.append((at + 3, at + len(text), SECRET_MARKER))
                return _Open("string", closer=quotes, secret=secret)
        if text[:1] in (b"[", b"{"):
            depth = _bracket_depth(text)
            return _Open("brackets", depth=depth) if depth > 0 else None
        continued = text.endswith(b"\\") and not text.endswith(b"\\\\")
        start, end = _scalar(text)
        if end > start:
            scalar = text[start:end]
            marker = (
                None
                if is_placeholder(scalar) or names_a_secret(scalar)
                else SECRET_MARKER
                if secret
                else ENTROPY_MARKER
                if high_entropy(scalar, key)
                else None
            )
            if marker:
                spans.append((at + start, at + end, marker))
        return _Open("continued", secret=secret) if continued else None

    def _continue(
        self, open_value: _Open, line: bytes, offset: int, spans: list[tuple[int, int, bytes]]
    ) -> _Open | None:
        """One more line of a value spanning lines; the value still open after it, or None."""
        content = line.strip()
        lead = len(line) - len(line.lstrip(b" \t"))
        if open_value.kind == "block":
            if content and lead <= open_value.indent:
                # The block ended before this line: judge it as a line of its own.
                return self._reread(line, offset, spans)
            if open_value.secret and content:
                spans.append((offset + lead, offset + len(line.rstrip()), SECRET_MARKER))
            return open_value
        if open_value.kind == "string":
            closes = content.find(open_value.closer)
            if open_value.secret and content:
                stop = lead + closes if closes >= 0 else len(line.rstrip())
                if stop > lead:
                    spans.append((offset + lead, offset + stop, SECRET_MARKER))
            return None if closes >= 0 else open_value
        if open_value.kind == "brackets":
            depth = open_value.depth + _bracket_depth(content)
            return _Open("brackets", depth=depth) if depth > 0 else None
        # A .properties value continued by a trailing backslash.
        if open_value.secret and content:
            spans.append((offset + lead, offset + len(line.rstrip()), SECRET_MARKER))
        return open_value if content.endswith(b"\\") else None

    def _reread(self, line: bytes, offset: int, spans: list[tuple[int, int, bytes]]) -> _Open | None:
        key_line = _key_line(line)
        if key_line is not None:
            return self._key_line(key_line, offset, spans)
        content = line.lstrip(b" \t")
        if content[:1] == b"-" and content[1:2] in (b"", b" ", b"\t"):
            return self._item(line, offset, spans)
        return None


def _key_line(line: bytes) -> Any:
    """The match of a key line, or None: an unquoted key's colon must be followed by a space,
    a quote or the line's end (`http://x`, `std::string` and `a:b` are no key lines)."""
    match = _KEY_LINE.fullmatch(line)
    if match is None or match.group(3) != b":" or match.start(4) != match.end(4):
        return match
    if match.group(2)[:1] in b"\"'" or match.start(5) == match.end(5) or line[match.start(5)] in b"\"'":
        return match
    return None


def _scalar(text: bytes) -> tuple[int, int]:
    """Where the scalar of a one-line value lies in it: inside its quotes, or up to a ` #` comment
    (and a JSON-style trailing comma)."""
    if text[:1] in (b'"', b"'"):
        quote = text[:1]
        at = 1
        while at < len(text):
            if text[at : at + 1] == b"\\" and quote == b'"':
                at += 2
                continue
            if text[at : at + 1] == quote:
                return 1, at
            at += 1
        return 1, len(text)  # unclosed: the rest of the line
    comment = text.find(b" #")
    tab_comment = text.find(b"\t#")
    cuts = [c for c in (comment, tab_comment) if c >= 0]
    end = min(cuts) if cuts else len(text)
    value = text[:end].rstrip()
    if value.endswith(b",") and not value.endswith(b"\\,"):
        value = value[:-1].rstrip()
    return 0, len(value)


def _bracket_depth(text: bytes) -> int:
    """Open minus closed brackets outside quotes (a multi-line TOML array, a flow collection)."""
    depth = 0
    quote = 0
    for char in text:
        if quote:
            if char == quote:
                quote = 0
        elif char in b"\"'":
            quote = char
        elif char in b"[{":
            depth += 1
        elif char in b"]}":
            depth -= 1
    return depth
