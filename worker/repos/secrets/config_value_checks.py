"""What a value in a configuration file is: a placeholder, or a random-looking token.

The two judgements of worker/repos/secrets/config_values.py on a value already cut out of its line
(at most a line, or 1,000 bytes for a token): `is_placeholder` spares a secret-named key's value
that plainly holds no secret; `high_entropy` withholds an unnamed key's value that looks like a
key or a token, as gitleaks' generic-api-key rule and detect-secrets' HighEntropyString plugin
judge one, with their known false positives (hashes, UUIDs, identifiers, public material) spared.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from typing import Any

import re2

MIN_TOKEN_LENGTH = 20


def compile_re2(pattern: bytes) -> Any:
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options=options)


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


_PLACEHOLDER = compile_re2(rb"^(?:" + _PLACEHOLDER_SHAPES + rb")$")
# A camelCase, PascalCase or UPPER_SNAKE name holding a secret's word is the name of one, not
# one: `input_token: nextToken` (an API's pagination field), `password: DB_PASSWORD` (a variable).
_NAME_OF_A_SECRET = compile_re2(
    rb"^(?:[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+|(?:[A-Z][a-z0-9]+){2,}|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)$"
)
_SECRET_WORD = compile_re2(rb"(?i)pass|pwd|secret|token|key|cred|auth")


def shannon_entropy(value: bytes) -> float:
    """Bits per character, as gitleaks computes it (over bytes)."""
    if not value:
        return 0.0
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in Counter(value).values())


def is_placeholder(value: bytes) -> bool:
    """A value that plainly holds no secret: empty, null, a boolean, a template or variable
    reference, an angle-bracket hint, a mask (`***`, `xxxx`), `changeme`, `your_key_here`, a
    marker we wrote, or a number of at most three digits (a flag or a count, never a credential
    worth hiding: 1,000 guesses at most). Every rule of the engine spares these
    (worker/repos/secrets/secret_filters.py)."""
    stripped = value.strip()
    return not stripped or stripped.lower() in _PLACEHOLDER_WORDS or bool(_PLACEHOLDER.match(stripped))


def names_a_secret(value: bytes) -> bool:
    """Is the value the name of a secret (`nextToken`, `DB_PASSWORD`), not one? Config files only:
    in code the value checks of worker/repos/secrets/secret_filters.py judge names their own way."""
    stripped = value.strip()
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
_MIN_CLASS_CHANGES = 0.42
_MAX_WORDINESS = 0.4
_TOKEN = compile_re2(rb"^[A-Za-z0-9+/=_-]+$")
_HEX = compile_re2(rb"^(?:0x)?[0-9a-fA-F]+$")
_WORD_RUN = compile_re2(rb"[a-z]{3,}")
_DATE = compile_re2(rb"(?:19|20)[0-9]{2}[_-]?[01][0-9][_-]?[0-3][0-9]")
_UUID = compile_re2(rb"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
_HASH_PREFIX = compile_re2(rb"(?i)^(?:sha(?:1|224|256|384|512)|md5|blake2b?|xxh\d*)[-_:]")
# The last word of a key whose values are hashes, revisions, identifiers or public material.
_NOT_SECRET_WORDS = frozenset(
    b"sha sha1 sha224 sha256 sha384 sha512 md5 hash hashes checksum checksums digest integrity rev "
    b"revision commit ref etag fingerprint uuid guid id ids version publickey pubkey cert certificate "
    b"ca".split()
)
_KEY_WORD = compile_re2(rb"[A-Z]?[a-z0-9]+|[A-Z0-9]+(?:[a-z0-9]*)")


def _names_no_secret(key: bytes) -> bool:
    """Does the key's last word (or last two: `public_key`) name a hash, an id or public material?"""
    words = [w.lower() for w in _KEY_WORD.findall(key)]
    if not words:
        return False
    return words[-1] in _NOT_SECRET_WORDS or b"".join(words[-2:]) in _NOT_SECRET_WORDS


def _class_changes(value: bytes) -> float:
    """The share of neighbouring characters of different classes (upper, lower, digit, other)."""

    def kind(c: int) -> int:
        return 0 if 65 <= c <= 90 else 1 if 97 <= c <= 122 else 2 if 48 <= c <= 57 else 3

    kinds = [kind(c) for c in value]
    return sum(a != b for a, b in itertools.pairwise(kinds)) / (len(value) - 1)


def high_entropy(value: bytes, key: bytes) -> bool:
    """Is an unnamed key's value one random token (a key, a token), not a hash, an id or a word?"""
    if len(value) < MIN_TOKEN_LENGTH or len(value) > 1000 or not _TOKEN.match(value) or value[:1] == b"/":
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
