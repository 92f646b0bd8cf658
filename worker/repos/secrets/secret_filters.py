"""What a rule's match must also be to count as a secret: the post-filters of worker/repos/secrets/redaction.py.

- **Value checks** for the rules that find a secret by the name it is assigned to: `token =
  request.token` is code, `token: f00Bar9z` is a secret (`VALUE_CHECKS`, by `Rule.check`).
- **gitleaks' filters** for its vendored rules (worker/repos/secrets/gitleaks_rules.py): a minimum
  Shannon entropy of the secret, and allowlists (regexes over the secret, the whole match or its
  line, and stop words in the secret), evaluated as gitleaks evaluates them.

All regexes here are RE2 (linear time) or Python regexes anchored on a value already cut out
by a rule (bounded: at most the 600 or so bytes a rule's value may hold).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import re2

from worker.repos.secrets.config_value_checks import is_placeholder, shannon_entropy
from worker.repos.secrets.secret_rules import Allowlist

__all__ = ["VALUE_CHECKS", "SecretFilter", "compile_allowlist", "shannon_entropy"]

_PLACEHOLDER = re.compile(
    rb"""^(?:|none|null|nil|true|false|undefined|yes|no|on|off|\*+|x+|\.+|-+|<[^>]*>|%s|%\w|\$\w+|\$\{.*\}|
    \{\{.*\}\}|\{[\w.]*\}|\[REDACTED:.*)$""",
    re.IGNORECASE | re.VERBOSE,
)
_TEMPLATE = re.compile(rb"\$\{|\{\{|\}\}|%\(|#\{|\$\(")
_DOTTED_NAME = re.compile(rb"^[A-Za-z_$][A-Za-z0-9_$]*(?:(?:\.|->|::)[A-Za-z_$][A-Za-z0-9_$]*)+$")
_NAME = re.compile(rb"^[A-Za-z_$][A-Za-z0-9_$]*$")
_NAME_OF_A_SECRET = re.compile(rb"(?i)pass|pwd|secret|token|key|cred|auth")
_TYPE_NAMES = {
    b"str",
    b"string",
    b"bytes",
    b"int",
    b"integer",
    b"number",
    b"bool",
    b"boolean",
    b"any",
    b"object",
    b"optional",
    b"required",
    b"text",
    b"secretstr",
    b"secretbytes",
}
# A value of a `*_KEY` / `*_PW` key that looks like a credential, not like a column name
# (`PRIMARY_KEY = "user_id"`) or a cache key (`CACHE_KEY = "users:v2"`).
_TOKEN_CHARS = re.compile(rb"^[A-Za-z0-9+/=_.~!@#$%^&*-]{8,600}$")
_LETTER = re.compile(rb"[A-Za-z]")
_DIGIT = re.compile(rb"[0-9]")


def _quoted_value_is_secret(value: bytes) -> bool:
    stripped = value.strip()
    return (
        bool(stripped)
        and not _PLACEHOLDER.match(stripped)
        and not _TEMPLATE.search(stripped)
        and not is_placeholder(stripped)  # `changeme`, `~`, `%(name)s`: the placeholders config files use
    )


def _unquoted_value_is_secret(value: bytes) -> bool:
    """Is an unquoted value of a secret-named key a secret, or code (`request.token`, `get()`)?"""
    if not _quoted_value_is_secret(value) or value[:1] in b"$%{<([@&*#\\|>!":
        return False
    if any(c in value for c in b"([{"):
        return False  # a call, a subscript, a literal: code
    if _DOTTED_NAME.match(value):
        return False  # settings.DB_PASSWORD, this.token, os.environ
    return not (_NAME.match(value) and (_NAME_OF_A_SECRET.search(value) or value.lower() in _TYPE_NAMES))


def _value_looks_like_a_credential(value: bytes) -> bool:
    """A value of a key that only may hold a secret (`STRIPE_KEY`, `DB_PW`): letters and digits."""
    return (
        _unquoted_value_is_secret(value)
        and bool(_TOKEN_CHARS.match(value))
        and bool(_LETTER.search(value))
        and bool(_DIGIT.search(value))
    )


def _has_a_digit(value: bytes) -> bool:
    """gitleaks' extra condition on its generic rule: a secret without a digit is a word."""
    return bool(_DIGIT.search(value))


VALUE_CHECKS: dict[str, Callable[[bytes], bool]] = {
    "quoted": _quoted_value_is_secret,
    "unquoted": _unquoted_value_is_secret,
    "credential": _value_looks_like_a_credential,
    "has-digit": _has_a_digit,
}


def _re2_options() -> Any:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = 64 << 20
    return options


@dataclass(frozen=True)
class _CompiledAllowlist:
    target: str
    regexes: Any | None  # one RE2 alternation of the allowlist's regexes
    stopwords: Any | None  # one case-insensitive RE2 alternation of its stop words

    def allows(self, secret: bytes, match: bytes, line: bytes) -> bool:
        text = {"secret": secret, "match": match, "line": line}[self.target]
        if self.regexes is not None and self.regexes.search(text):
            return True
        return self.stopwords is not None and bool(self.stopwords.search(secret))


def compile_allowlist(allowlist: Allowlist) -> _CompiledAllowlist:
    regexes = stopwords = None
    if allowlist.regexes:
        regexes = re2.compile("|".join(f"(?:{r})" for r in allowlist.regexes), options=_re2_options())
    if allowlist.stopwords:
        words = "|".join(re2.escape(w) for w in allowlist.stopwords)
        stopwords = re2.compile(f"(?i:{words})", options=_re2_options())
    return _CompiledAllowlist(allowlist.target, regexes, stopwords)


@dataclass(frozen=True)
class SecretFilter:
    """A rule's conditions on what it found, beyond its regex (gitleaks' entropy and allowlists)."""

    entropy: float
    allowlists: tuple[_CompiledAllowlist, ...]

    def keeps(self, data: bytes, match: tuple[int, int], secret: tuple[int, int]) -> bool:
        value = data[secret[0] : secret[1]]
        if self.entropy and shannon_entropy(value) <= self.entropy:
            return False
        if not self.allowlists:
            return True
        line_start = data.rfind(b"\n", 0, match[0]) + 1
        line_end = data.find(b"\n", match[1])
        line = data[line_start : line_end if line_end != -1 else len(data)]
        whole = data[match[0] : match[1]]
        return not any(a.allows(value, whole, line) for a in self.allowlists)
