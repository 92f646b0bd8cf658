"""Values in configuration files: judged by the key they stand under and by their randomness.

Source code and configuration need different rules. In code, `token = request.token` is code and
gitleaks' entropy floor spares `password = get_password()`; in a configuration file (YAML, JSON,
TOML, INI, .properties, .env) every value is data. So in a text that *is* a configuration file,
judged by its content (a blob is processed from its bytes alone, never from a file name, which
differs between the trees that share it: worker/repos/blob_process.py):

- **a secret-named key** (`password`, `api_token`, `clientSecret`, `user.token`; the same key
  words as the `secret-assignment` rules, worker/repos/secret_rules.py) has its whole value
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

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import re2

from worker.repos.secret_rules import SECRET_KEY_PATTERN, SECRET_KEY_WORDS

SECRET_MARKER = b"[REDACTED:secret-assignment]"
# Every secret-named key holds one of these words (any case): a key without one needs no RE2 call.
_KEY_WORDS = re.compile(b"|".join(re.escape(word.encode()) for word in SECRET_KEY_WORDS), re.IGNORECASE)
ENTROPY_MARKER = b"[REDACTED:high-entropy-value]"
# At most one line in this many may be neither config nor blank nor a comment (a stray line of a
# template, a key with spaces): a config file stays one; code exceeds it within a few lines.
_UNKNOWN_LINE_SHARE = 50
_MAX_LINE = 4096  # longer lines are not key lines (minified code, data blobs)

# --- placeholders ------------------------------------------------------------------------------
_PLACEHOLDER_WORDS = frozenset(
    b"none null nil undefined true false yes no on off changeme change_me change-me changeit "
    b"redacted todo tbd fixme placeholder read write".split()
)
_PLACEHOLDER_SHAPES = (
    rb"(?i)~|[*]+|[xX]+|[.]+|-+|_+|0+|"  # ***, xxxx, ..., -, 0000
    rb"\$\{[^}]*\}|\$\{\{.*\}\}|\$[A-Za-z_][A-Za-z0-9_]*|\{\{.*\}\}|\{%.*%\}|<[^<>]*>|%\([\w.-]+\)[sd]|"
    rb"%[A-Za-z_][A-Za-z0-9_]*%|#\{[^}]*\}|\{[\w.]*\}|\$\([^)]*\)|@[A-Za-z_][A-Za-z0-9_.-]*@|"  # ${VAR} {{ v }} <…> %(v)s %V% #{v} $(v) @v@
    rb"!(?:env|var|ENV|Ref|Sub|GetAtt|ImportValue|secret|vault)\b.*|"  # YAML tags naming a source
    rb"\[REDACTED:[a-z0-9-]+\]|your[_ -][A-Za-z_ -]*|[0-9]{1,3}"
)


def _re2(pattern: bytes) -> Any:
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options=options)


_PLACEHOLDER = _re2(rb"^(?:" + _PLACEHOLDER_SHAPES + rb")$")
# A camelCase, PascalCase or UPPER_SNAKE name holding a secret's word is the name of one, not
# one: `input_token: nextToken` (an API's pagination field), `password: DB_PASSWORD` (a variable).
_NAME_OF_A_SECRET = _re2(
    rb"^(?:[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+|(?:[A-Z][a-z0-9]+){2,}|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)$"
)
_SECRET_WORD = _re2(rb"(?i)pass|pwd|secret|token|key|cred|auth")


def is_placeholder(value: bytes) -> bool:
    """A value that plainly holds no secret: empty, null, a boolean, a template or variable
    reference, an angle-bracket hint, a mask (`***`, `xxxx`), `changeme`, `your_key_here`, a
    marker we wrote, a number of at most three digits (a flag or a count, never a credential
    worth hiding: 1,000 guesses at most), or the name of a secret (`nextToken`, `DB_PASSWORD`)."""
    stripped = value.strip()
    if not stripped or stripped.lower() in _PLACEHOLDER_WORDS or _PLACEHOLDER.match(stripped):
        return True
    return bool(_NAME_OF_A_SECRET.match(stripped) and _SECRET_WORD.search(stripped))


# --- randomness --------------------------------------------------------------------------------
# detect-secrets' HighEntropyString limits are 4.5 bits per character over base64 and 3.0 over
# hex. A random base64 token of 20 characters has about 4.0 (it cannot exceed log2(20) = 4.32), so
# a fixed 4.5 misses every token shorter than about 30 characters, and on the config files of this
# machine 3.5 (gitleaks' generic floor) takes API model names (`AwsEc2NetworkAclEntry`) for keys.
# So a token must pass three tests, each tuned on random tokens (≥ 95 % of random base62 tokens
# of 24-64 characters pass all three) and on the values of 7,000 third-party config files
# (bench/config_values.py): an entropy within a margin of the most its length allows (log2 of its
# length, 6 at most; the margin 0.5 + 0.01 per character); character classes (upper, lower,
# digit, symbol) that change from one character to the next at least 42 % of the time
# (identifiers change at each word, ~30 %); and under 40 % of it in runs of three or more
# lower-case letters (words).
_MIN_LENGTH = 20
_MIN_CLASS_CHANGES = 0.42
_MAX_WORDINESS = 0.4
_TOKEN = _re2(rb"^[A-Za-z0-9+/=_-]+$")
_HEX = _re2(rb"^(?:0x)?[0-9a-fA-F]+$")
_WORD_RUN = _re2(rb"[a-z]{3,}")
_DATE = _re2(rb"(?:19|20)[0-9]{2}[_-]?[01][0-9][_-]?[0-3][0-9]")
_UUID = _re2(rb"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
_HASH_PREFIX = _re2(rb"(?i)^(?:sha(?:1|224|256|384|512)|md5|blake2b?|xxh\d*)[-_:]")
# The last word of a key whose values are hashes, revisions, identifiers or public material.
_NOT_SECRET_WORDS = frozenset(
    b"sha sha1 sha224 sha256 sha384 sha512 md5 hash hashes checksum checksums digest integrity rev "
    b"revision commit ref etag fingerprint uuid guid id ids version publickey pubkey cert certificate "
    b"ca".split()
)
_KEY_WORD = _re2(rb"[A-Z]?[a-z0-9]+|[A-Z0-9]+(?:[a-z0-9]*)")


def _names_no_secret(key: bytes) -> bool:
    """Does the key's last word (or last two: `public_key`) name a hash, an id or public material?"""
    words = [w.lower() for w in _KEY_WORD.findall(key)]
    if not words:
        return False
    return words[-1] in _NOT_SECRET_WORDS or b"".join(words[-2:]) in _NOT_SECRET_WORDS


def shannon_entropy(value: bytes) -> float:
    if not value:
        return 0.0
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in Counter(value).values())


def _class_changes(value: bytes) -> float:
    """The share of neighbouring characters of different classes (upper, lower, digit, other)."""

    def kind(c: int) -> int:
        return 0 if 65 <= c <= 90 else 1 if 97 <= c <= 122 else 2 if 48 <= c <= 57 else 3

    kinds = [kind(c) for c in value]
    return sum(a != b for a, b in zip(kinds, kinds[1:], strict=False)) / (len(value) - 1)


def high_entropy(value: bytes, key: bytes) -> bool:
    """Is an unnamed key's value one random token (a key, a token), not a hash, an id or a word?"""
    if len(value) < _MIN_LENGTH or len(value) > 1000 or not _TOKEN.match(value) or value[:1] == b"/":
        return False
    if _names_no_secret(key) or _UUID.match(value) or _HASH_PREFIX.match(value) or _HEX.match(value):
        return False  # hex: hashes (lockfiles, SBOMs, revisions) far outnumber hex keys
    if not any(48 <= c <= 57 for c in value) or value.lower() == value or value.upper() == value:
        return False  # gitleaks: a secret without a digit is a word; random base64 has both cases
    if _DATE.search(value):
        return False  # `ListTagsForResource2020_05_31`: a name and a date
    margin = 0.5 + 0.01 * min(len(value), 64)
    if shannon_entropy(value) <= math.log2(min(len(value), 64)) - margin:
        return False
    wordy = sum(len(run) for run in _WORD_RUN.findall(value))
    return _class_changes(value) >= _MIN_CLASS_CHANGES and wordy < _MAX_WORDINESS * len(value)


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
_STRUCTURE = re.compile(rb"[ \t]*(?:---.*|\.\.\.|[\[\]{}(),]{1,4}|\"(?:[^\"\\]|\\.)*\",?|-?[0-9][0-9.eE+-]*,?)[ \t]*")
_BLOCK_SCALAR = re.compile(rb"[|>][-+0-9]*[ \t]*(?:#.*)?")
_COMMENT_STARTS = (b"#", b";", b"!", b"//", b"<!--")
# JSON, over the whole text: the pairs whose key holds a secret's word, and those whose value is
# long enough to be judged by its randomness (the others cannot be withheld: not looked at).
_JSON_VALUE = rb"(?:\"((?:[^\"\\\n]|\\.){0,1000})\"|(-?[0-9][0-9.eE+-]{0,100}))"
_JSON_SECRET_PAIR = _re2(
    rb"\"((?:[^\"\\\n]|\\.){0,100}(?i:pass|pwd|pw|secret|token|key|cred|auth|dsn|conn|webhook|salt)"
    rb"(?:[^\"\\\n]|\\.){0,100})\"[ \t\r\n]*:[ \t\r\n]*" + _JSON_VALUE
)
_JSON_LONG_PAIR = _re2(
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
        self._secret_key = _re2(rb"(?i)^(?:" + SECRET_KEY_PATTERN.encode() + rb")$")

    def is_secret_key(self, key: bytes) -> bool:
        """Does a key (a bare name, quoted, or a dotted path: `user.token`) name a secret?"""
        if not _KEY_WORDS.search(key):
            return False  # most keys
        return bool(self._secret_key.match(key.strip(b"\"'").rstrip(b"[]")))

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
        if is_placeholder(value):
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
        size = len(data)
        while start < size:
            end = data.find(b"\n", start)
            end = size if end == -1 else end
            line = data[start:end].rstrip(b"\r")
            content = line.lstrip(b" \t")
            if open_value is not None:
                open_value = self._continue(open_value, line, start, spans)
            elif len(line) > _MAX_LINE:
                unknown += 1
            elif not content or content.startswith(_COMMENT_STARTS):
                pass
            elif (key_line := _key_line(line)) is not None:
                keys += 1
                open_value = self._key_line(key_line, start, spans)
            elif content[:1] == b"-" and content[1:2] in (b"", b" ", b"\t"):
                open_value = self._item(line, start, spans)
            elif not (_SECTION.fullmatch(line) or _STRUCTURE.fullmatch(line)):
                unknown += 1
            if unknown > allowed_unknown:
                return None
            start = end + 1
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
        self, value: bytes, at: int, indent: int, key: bytes, secret: bool, spans: list[tuple[int, int, bytes]]
    ) -> _Open | None:
        """Withhold what a value on its key's line must; say how it goes on over the next lines."""
        text = value.rstrip()
        if not secret and len(text) < _MIN_LENGTH and text[:1] not in (b"|", b">", b"[", b"{", b"'", b'"'):
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
                if is_placeholder(scalar)
                else SECRET_MARKER
                if secret
                else ENTROPY_MARKER
                if high_entropy(scalar, key)
                else None
            )
            if marker:
                spans.append((at + start, at + end, marker))
        return _Open("continued", secret=secret) if continued else None

    def _continue(self, open_value: _Open, line: bytes, offset: int, spans: list[tuple[int, int, bytes]]) -> _Open | None:
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
