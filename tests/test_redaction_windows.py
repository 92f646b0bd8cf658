"""Line windows: rules declared line-bounded run only over the lines holding a keyword, and the
redaction is byte for byte what running every rule over the whole text gives."""

from __future__ import annotations

import dataclasses
import functools
import sysconfig
from pathlib import Path

import pytest
import re2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.secret_corpus import all_contexts, formats, samples
from tests.test_tools_redact import SAMPLES
from worker.repos.secrets.keyword_lines import KeywordLines
from worker.repos.secrets.redaction import Redactor
from worker.repos.secrets.secret_rules import Rule


@functools.cache
def redactors() -> tuple[Redactor, Redactor]:
    """(by line windows, as shipped; every rule over the whole text, the reference)."""
    return Redactor(), Redactor(by_lines=False)


def assert_same_redaction(data: bytes) -> None:
    windowed, whole = redactors()
    assert windowed.redact_bytes(data) == whole.redact_bytes(data)


def test_re2_searches_a_window_with_the_whole_text_as_context() -> None:
    text = b"xkey=1\nkey=2\nakey"
    line_start = re2.compile(r"(?m)(?:^|[^A-Za-z0-9])key")
    assert [m.span() for m in line_start.finditer(text, 7, 13)] == [(7, 10)]  # `^` after "\n"
    assert line_start.search(text, 1, 6) is None  # "x" before pos is seen: no `^`, no boundary
    assert re2.compile(r"(?m)=2$").search(text, 7, 12).span() == (10, 12)  # "\n" after endpos
    assert re2.compile(r"\bkey").search(text, 14) is None  # "a" before pos is a word character
    assert re2.compile(r"\Akey").search(text, 7) is None  # \A is the text's start, not pos


def test_windows_hold_each_keyword_line_and_the_lines_after_it() -> None:
    lines = [b"a = 1"] * 60
    lines[3] = b"TOKEN = 1"
    lines[30] = b"x_pass"
    text = b"\r\n".join(lines)  # CRLF: "\r" stays inside its line
    windows = KeywordLines(("token", "pass"), 2).windows(text)
    covered = {text.count(b"\n", 0, at) for start, end in windows for at in range(start, end)}
    assert {3, 4, 5, 30, 31, 32} <= covered
    assert all(text[start - 1 : start] in (b"", b"\n") for start, _ in windows)  # whole lines
    assert all(text[end - 1 : end] == b"\n" or end == len(text) for _, end in windows)
    assert 0 not in covered and 59 not in covered


def test_a_keyword_on_the_last_line_without_a_newline_is_in_a_window() -> None:
    text = b"a = 1\n" * 20 + b"password = 'hunter2'"
    assert KeywordLines(("pass",), 0).windows(text)[-1][1] == len(text)
    assert_same_redaction(text)
    assert b"hunter2" not in redactors()[0].redact_bytes(text).data


def _corpus_lines() -> list[str]:
    texts = [text for sample in samples() for _, text in all_contexts(sample)]
    texts += [document for _, document, _ in formats()]
    texts += list(SAMPLES.values())
    return sorted({line for text in texts for line in text.splitlines()})


_EDGES = [
    "key",
    "KEY=",
    "=hunter2hunter2",
    "db_password: 'c0rrect-h0rse'",
    "ſecret = 'abc123def456'",  # long s: (?i) folds it to "s"
    "API_\u212aEY = 'Zx9Qw8Er7Ty6Ui5O'",  # Kelvin sign: (?i) folds it to "k"
    "\tauth_token = f00Bar9zQ\r",
    "pw",
    "<password>s3cr3t-value</password>",
    "STRIPE_KEY = 'rk_live_abcdef1234567890'",
    "def key(self): return self._key  # ключ",
    "curl https://api.example.com/v1/deploy/a/path/longer/than/a/window/reaches/past/its/keyword",  # curl's `\\s` may take the line break: not line-bounded
    "-u deploy:Tr0ub4dor3x",
    "generic_api_key = \\",
    '  "a8f3Kz09QwPl7mNc2Xv"',
    "",
    " ",
]


@functools.cache
def _pool() -> list[str]:
    code = Path(sysconfig.get_paths()["stdlib"], "netrc.py").read_text().splitlines()
    return _corpus_lines() + code + _EDGES


@st.composite
def texts(draw: st.DrawFn) -> bytes:
    pool = _pool()
    part = st.one_of(st.sampled_from(pool), st.sampled_from(_EDGES), st.text(max_size=30))
    parts = draw(st.lists(part, max_size=30))
    separators = draw(st.lists(st.sampled_from(["\n", "\r\n", "", " ", "\n\n"]), min_size=len(parts)))
    text = "".join(part + sep for part, sep in zip(parts, separators, strict=False))
    if draw(st.booleans()):
        text = text.rstrip("\n")  # no trailing newline
    return text.encode("utf-8", "surrogatepass")


def test_every_pair_of_edge_lines_is_redacted_the_same_by_windows_and_whole() -> None:
    for first in _EDGES:
        for second in _EDGES:
            for separator in ("\n", "\r\n", ""):
                assert_same_redaction((first + separator + second).encode())
                assert_same_redaction(("x = 1\n" + first + separator + second + "\n").encode())


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts())
def test_redaction_by_line_windows_equals_redaction_of_the_whole_text(data: bytes) -> None:
    assert_same_redaction(data)


def test_the_standard_library_is_redacted_the_same_by_windows_and_whole() -> None:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(stdlib.glob("*.py")) + sorted(stdlib.glob("email/*.py")) + sorted(stdlib.glob("http/*.py"))
    assert len(files) > 150
    found = 0
    for path in files:
        data = path.read_bytes()
        assert_same_redaction(data)
        found += sum(redactors()[0].redact_bytes(data).kinds.values())
    assert found > 0  # the comparison covered files where secret-assignment rules fire


def test_a_line_bounded_rule_without_keywords_is_refused_when_the_redactor_is_built() -> None:
    rule = Rule("example", r"secret=(\w+)", (), lines_after=0)
    with pytest.raises(ValueError, match="keywords of a line-bounded rule"):
        Redactor((rule,))
    assert Redactor((rule,), by_lines=False).redact("secret=abc") == "secret=[REDACTED:example]"


def test_declaring_rules_line_bounded_does_not_make_stored_blobs_be_processed_again() -> None:
    # blobstore.generation() fingerprints the rules by repr: where a rule is searched must not
    # enter it, or every stored blob of every repo would be processed anew for identical output.
    bounded = [rule for rule in redactors()[0].rules if rule.lines_after is not None]
    assert len(bounded) == 7
    for rule in bounded:
        assert repr(rule) == repr(dataclasses.replace(rule, lines_after=None))
