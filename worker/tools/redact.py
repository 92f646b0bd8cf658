"""Secret redaction for everything a tool shows, and the last step of every tool result.

Detection is the maintained library detect-secrets (its regex-based plugins only: the
high-entropy and IP plugins flag git SHAs, hashes and ordinary code), a short list of modern
token formats the library does not know yet, and whole PEM private-key blocks. Each secret is
replaced by `[REDACTED:<type>]`.

`Redactor.redact` never changes the number of lines of its input, so read_file can redact a
whole file and still slice it by line number.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterable
from typing import Any

from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import DENYLIST as KEYWORD_DENYLIST
from detect_secrets.plugins.keyword import KeywordDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from worker.tools.context import ToolContext
from worker.tools.registry import ToolResult

_PLUGINS: tuple[type[BasePlugin], ...] = (
    AWSKeyDetector,
    ArtifactoryDetector,
    AzureStorageKeyDetector,
    BasicAuthDetector,
    CloudantDetector,
    DiscordBotTokenDetector,
    GitHubTokenDetector,
    GitLabTokenDetector,
    IbmCloudIamDetector,
    IbmCosHmacDetector,
    JwtTokenDetector,
    KeywordDetector,
    MailchimpDetector,
    NpmDetector,
    OpenAIDetector,
    PrivateKeyDetector,
    PypiTokenDetector,
    SendGridDetector,
    SlackDetector,
    SoftlayerDetector,
    SquareOAuthDetector,
    StripeDetector,
    TelegramBotTokenDetector,
    TwilioKeyDetector,
)


def _keyword_literals() -> tuple[str, ...]:
    """Every word KeywordDetector looks for, its `_?` spelled both ways: 'api_key', 'apikey'."""
    words: list[str] = []
    for entry in KEYWORD_DENYLIST:
        words.extend([entry.replace("_?", "_"), entry.replace("_?", "")] if "_?" in entry else [entry])
    return tuple(dict.fromkeys(words))


# Python's re scans 4 MB of text in ~40 ms per case-insensitive or unanchored pattern, and there
# are ~50 of them; a substring search takes ~2 ms. So each plugin gets triggers run over the
# LOWER-CASED text: a plain string is a substring every match of the plugin contains, a regex a
# looser (lower-case, literal-first) version of the plugin's own. A line no trigger touches
# cannot match; the plugin itself then runs only on the lines that are left.
_TRIGGERS: dict[type[BasePlugin], tuple[str | re.Pattern[str], ...]] = {
    AWSKeyDetector: ("akia", "abia", "acca", "asia", "a3t", "aws"),
    ArtifactoryDetector: (re.compile(r"akc[a-z0-9]{10}"), re.compile(r"ap[0-9a-f][a-z0-9]{8}")),
    AzureStorageKeyDetector: ("accountkey=",),
    BasicAuthDetector: ("://",),
    CloudantDetector: (re.compile(r"cl(?:oudant|ou)?[_-]?(?:api)?(?:key|pwd|pw|pass|token)"), "cloudant.com"),
    DiscordBotTokenDetector: (re.compile(r"\.[a-z0-9_-]{6}\.[a-z0-9_-]{27}"),),
    GitHubTokenDetector: ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    GitLabTokenDetector: (
        "glpat-",
        "gldt-",
        "glft-",
        "glsoat-",
        "glrt-",
        "gr1348941",
        "glcbt-",
        "glimt-",
        "glptt-",
        "glagent-",
        "gloas-",
    ),
    IbmCloudIamDetector: ("key", "pwd", "pass", "token"),
    IbmCosHmacDetector: (re.compile(r"secret[-_]?(?:access)?[-_]?key"),),
    JwtTokenDetector: ("eyj",),
    KeywordDetector: _keyword_literals(),
    MailchimpDetector: ("-us",),
    NpmDetector: ("_authtoken=",),
    OpenAIDetector: ("t3blbkfj",),
    PrivateKeyDetector: ("private key", "putty-user-key-file-2"),
    PypiTokenDetector: ("pypi-age",),
    SendGridDetector: ("sg.",),
    SlackDetector: ("xox", "hooks.slack.com"),
    SoftlayerDetector: ("softlayer", re.compile(r"sl[_-]?(?:api)?[_-]?(?:key|pwd|pass|token)")),
    SquareOAuthDetector: ("sq0csp-",),
    StripeDetector: ("k_live_",),
    TelegramBotTokenDetector: (re.compile(r":[0-9a-z_-]{35}"),),
    TwilioKeyDetector: (re.compile(r"ac[a-z0-9]{32}"), re.compile(r"sk[a-z0-9]{32}")),
}

# Formats detect-secrets 1.5 misses (its OpenAI plugin knows only the legacy T3BlbkFJ keys).
# Each starts with a literal so re scans fast; a match glued to a preceding letter or digit
# ("task-…") is left alone. Character classes exclude "\n": lines are never joined or split.
_EXTRA_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(pattern))
    for label, pattern in (
        ("anthropic-key", r"sk-ant-[A-Za-z0-9_-]{20,}"),
        ("openai-key", r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"),
        ("openai-key", r"sk-[A-Za-z0-9]{32,}"),
        ("github-token", r"github_pat_[A-Za-z0-9_]{22,}"),
        ("github-token", r"gh[pousr]_[A-Za-z0-9_]{30,}"),
        ("slack-token", r"xapp-\d+-[A-Za-z0-9-]{10,}"),
        ("slack-token", r"xox[a-z]-[A-Za-z0-9-]{10,}"),
        ("google-api-key", r"AIza[0-9A-Za-z_-]{35}"),
    )
)

# Lower-cased literal starts of _EXTRA_PATTERNS (gh[pousr]_ is added as a regex).
_EXTRA_PREFIXES = ("sk-", "github_pat_", "xapp-", "xox", "aiza")
_SHORT_TEXT_CHARS = 4096

_PEM_LABEL = "[REDACTED:private-key]"
_PEM_HEAD = r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
# A key body is a few KB at most; the bound keeps a stray BEGIN (e.g. in a PEM parser) from
# swallowing a whole file up to some unrelated END far below.
_PEM_BLOCK = re.compile(
    _PEM_HEAD + r".{0,20000}?-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----", re.DOTALL
)
_PEM_OPEN = re.compile(_PEM_HEAD + r"[^\n]*")  # a BEGIN whose END is missing (cut text)
# One line of a key body, possibly inside a string literal: "MIIEow...\n",
_KEY_BODY = re.compile(r"""^\s*["']?([A-Za-z0-9+/]{40,}={0,2})(?:\\n)?["']?\s*[,;+)]?\s*\\?$""")
_KEY_BODY_SHORT = re.compile(r"""^\s*["']?[A-Za-z0-9+/]+={0,2}(?:\\n)?["']?\s*[,;+)]?\s*\\?$""")
_PEM_HEADER_LINE = re.compile(r"^\s*[A-Za-z-]+: \S")  # "Proc-Type: 4,ENCRYPTED" inside a block
_MAX_OPEN_BODY_LINES = 200
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_+/=-]*")  # always matches (maybe empty)


def _slug(secret_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")


def looks_like_key_body(line: str) -> bool:
    """A bare base64 line of 40+ chars with mixed case and digits: a private key's body line.

    search shows single lines out of context, where a line from the middle of a key block has
    no BEGIN marker next to it; hex digests (no upper case) and identifiers (no digits) pass.
    """
    match = _KEY_BODY.match(line)
    if not match:
        return False
    body = match.group(1)
    return (
        any(c.isdigit() for c in body) and any(c.isupper() for c in body) and any(c.islower() for c in body)
    )


def maybe_key_fragment(line: str) -> bool:
    """A short base64-looking line ("AbC+9x==", the last line of a key body): is it in a key block?

    search asks read_file's cached, whole-file redaction in that case instead of guessing.
    """
    if not _KEY_BODY_SHORT.match(line):
        return False
    core = line.strip().strip("\"',;+)\\")
    return len(core) >= 8 and any(c.isdigit() or c in "+/=" for c in core) and any(c.isalpha() for c in core)


class _Detector:
    """One detect-secrets plugin with the triggers that rule out most lines cheaply."""

    def __init__(self, plugin: BasePlugin) -> None:
        self.plugin = plugin
        self.marker = f"[REDACTED:{_slug(str(plugin.secret_type))}]"
        self.patterns: list[re.Pattern[str]] = (
            list(plugin.denylist) if isinstance(plugin, RegexBasedDetector) else []
        )
        triggers = _TRIGGERS.get(type(plugin))
        if triggers is None:  # a plugin without a table entry: its own regexes, case-folded
            triggers = tuple(
                re.compile(p.pattern, p.flags | re.IGNORECASE | re.MULTILINE) for p in self.patterns
            )
        self.triggers = triggers

    def candidate_lines(self, low: str, line_of: Callable[[int], int]) -> set[int]:
        """Lines (0-based) of the lower-cased text where this plugin could match."""
        lines: set[int] = set()
        for trigger in self.triggers:
            if isinstance(trigger, str):
                at = low.find(trigger)
                while at != -1:
                    lines.add(line_of(at))
                    at = low.find(trigger, at + 1)
            else:
                for match in trigger.finditer(low):
                    lines.update(
                        range(line_of(match.start()), line_of(max(match.start(), match.end() - 1)) + 1)
                    )
        return lines

    def spans(self, line: str) -> list[tuple[int, int]]:
        values = {v for v in self.plugin.analyze_string(line) if v}
        if not values:
            return []
        if not self.patterns:
            return _value_spans(line, values)
        found = []
        for pattern in self.patterns:
            for match in pattern.finditer(line):
                if not pattern.groups:
                    if match.group(0) in values:
                        found.append(match.span())
                    continue
                # detect-secrets reports a regex's capture group as the secret; a group at the
                # very start is a type prefix ("ghp" of a GitHub token), not the value: redact
                # the whole match then, else just the group (an AWS secret after `aws_key = "`).
                groups = [i for i in range(1, pattern.groups + 1) if match.group(i)]
                best = max(groups, key=lambda i: len(match.group(i)), default=0)
                if not best or match.start(best) == match.start():
                    found.append(match.span())
                else:
                    found.append(match.span(best))
        # A match glued to more token characters is one token: redact it to its end. (The JWT
        # pattern matches lazily and stops before the signature, which is the secret part.)
        return [(start, _token_end(line, end)) for start, end in found]


def _token_end(line: str, end: int) -> int:
    tail = _TOKEN_TAIL.match(line, end)
    return tail.end() if tail else end


def _value_spans(line: str, values: Iterable[str]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for value in values:
        # A short value ("pw1") could also be a piece of a word; only whole tokens are replaced.
        pattern = re.escape(value) if len(value) >= 8 else rf"(?<!\w){re.escape(value)}(?!\w)"
        spans.extend(m.span() for m in re.finditer(pattern, line))
    return spans


def _replace_spans(line: str, spans: list[tuple[int, int, str]]) -> str:
    merged: list[tuple[int, int, str]] = []
    for start, end, marker in sorted(spans):
        if merged and start < merged[-1][1]:
            last = merged[-1]
            merged[-1] = (last[0], max(last[1], end), last[2])
        else:
            merged.append((start, end, marker))
    for start, end, marker in reversed(merged):
        line = line[:start] + marker + line[end:]
    return line


def _redact_pem(text: str) -> str:
    if "PRIVATE KEY" not in text:
        return text
    text = _PEM_BLOCK.sub(lambda m: "\n".join([_PEM_LABEL] * (m.group(0).count("\n") + 1)), text)
    if not _PEM_OPEN.search(text):
        return text
    # A BEGIN without its END (the text was cut): redact the rest of that line and the body
    # lines that follow it.
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        if _PEM_OPEN.search(lines[index]):
            lines[index] = _PEM_OPEN.sub(_PEM_LABEL, lines[index])
            follow = index + 1
            while follow < len(lines) and follow - index <= _MAX_OPEN_BODY_LINES:
                candidate = lines[follow]
                if candidate.strip() and not (
                    _KEY_BODY_SHORT.match(candidate) or _PEM_HEADER_LINE.match(candidate)
                ):
                    break
                if candidate.strip():
                    lines[follow] = _PEM_LABEL
                follow += 1
            index = follow
        else:
            index += 1
    return "\n".join(lines)


def _redact_extra(text: str) -> str:
    for label, pattern in _EXTRA_PATTERNS:
        marker = f"[REDACTED:{label}]"

        def replace(match: re.Match[str], marker: str = marker) -> str:
            before = match.string[match.start() - 1] if match.start() else " "
            return match.group(0) if before.isalnum() else marker

        text = pattern.sub(replace, text)
    return text


class Redactor:
    """Replaces secrets with `[REDACTED:<type>]`; build once per process (see get_redactor)."""

    def __init__(self) -> None:
        self._detectors = [_Detector(plugin_class()) for plugin_class in _PLUGINS]
        # For short texts (one search hit, a path) the per-call cost of ~100 separate scans
        # dominates: one alternation of every trigger rules most of them out in one pass.
        parts = [
            re.escape(t) if isinstance(t, str) else t.pattern for d in self._detectors for t in d.triggers
        ]
        parts += [re.escape(prefix) for prefix in _EXTRA_PREFIXES] + ["gh[pousr]_", "private key"]
        tabled = all(type(d.plugin) in _TRIGGERS for d in self._detectors)  # else triggers need re.I
        self._anything = re.compile("|".join(parts)) if tabled else None

    def redact(self, text: str) -> str:
        if not text:
            return text
        if self._anything and len(text) <= _SHORT_TEXT_CHARS and not self._anything.search(text.lower()):
            return text
        text = _redact_extra(_redact_pem(text))
        # Lower-casing may change the length of a line (e.g. "İ") but never the line breaks, so
        # line numbers found in `low` are those of `text`.
        low = text.lower()
        starts = [0] + [m.end() for m in re.finditer("\n", low)]

        def line_of(offset: int) -> int:
            return bisect.bisect_right(starts, offset) - 1

        candidates: dict[int, list[_Detector]] = {}
        for detector in self._detectors:
            for number in detector.candidate_lines(low, line_of):
                candidates.setdefault(number, []).append(detector)
        if not candidates:
            return text
        lines = text.split("\n")
        for number, detectors in candidates.items():
            line = lines[number]
            spans = [(s, e, d.marker) for d in detectors for s, e in d.spans(line)]
            if spans:
                lines[number] = _replace_spans(line, spans)
        return "\n".join(lines)


@functools.lru_cache(maxsize=1)
def get_redactor() -> Redactor:
    """The process-wide Redactor: building the plugins costs more than most redactions."""
    return Redactor()


def _redact_data(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list | tuple):
        return [_redact_data(item, redact) for item in value]
    if isinstance(value, dict):
        return {key: _redact_data(item, redact) for key, item in value.items()}
    return value


def finish(ctx: ToolContext, text: str, data: dict[str, Any] | None = None) -> ToolResult:
    """Every tool's last step: redact the text and the data, and cap the text with a notice."""
    text = ctx.redact(text)
    limit = ctx.settings.tool_output_max_chars
    if len(text) > limit:
        # Cut at a line end so no half line (or half a redaction marker) is shown.
        keep = text[: max(0, limit - 120)]
        if "\n" in keep:
            keep = keep[: keep.rindex("\n")]
        cut = len(text) - len(keep)
        text = (
            f"{keep}\n[output cut: {cut:,} more characters not shown — ask for less, e.g. a narrower range]"
        )
    return ToolResult(text=text, data=_redact_data(data or {}, ctx.redact))
