"""detect-secrets' regex plugins as RE2 rules of the redactor (worker/repos/secrets/redaction.py).

Every regex-based plugin the installed detect-secrets registers is compiled with RE2. Its few
look-arounds are dropped first (`(?!\\w)`, `(?<=\\W)`): without them a rule matches a little
more, never less, which is the safe direction for redaction. An upgrade of the library therefore
brings its new rules along; `tests/test_tools_redact.py` checks that each one still compiles.
"""

from __future__ import annotations

import re
from typing import Any

import re2

from worker.repos.secrets.secret_rules import Rule

# detect-secrets plugins that are not regex rules, or flag too much ordinary code to redact.
_SKIPPED_PLUGINS = {"Base64HighEntropyString", "HexHighEntropyString", "KeywordDetector", "IPPublicDetector"}
# Look-arounds (RE2 has none) without nested groups, as detect-secrets writes them: removing
# one only widens what its rule matches.
_LOOKAROUND = re.compile(r"\(\?<?[=!][^()]*\)")
# The literals every match of a detect-secrets plugin contains (lower case); absent: always run.
_PLUGIN_KEYWORDS: dict[str, tuple[str, ...]] = {
    "AWSKeyDetector": ("akia", "abia", "acca", "asia", "a3t", "aws"),
    "AzureStorageKeyDetector": ("accountkey=",),
    "BasicAuthDetector": ("://",),
    "CloudantDetector": ("cl",),
    "GitHubTokenDetector": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    "GitLabTokenDetector": ("gl", "gr1348941"),
    "IbmCloudIamDetector": ("key", "pwd", "pass", "token"),
    "IbmCosHmacDetector": ("secret",),
    "JwtTokenDetector": ("eyj",),
    "MailchimpDetector": ("-us",),
    "NpmDetector": ("_authtoken",),
    "OpenAIDetector": ("t3blbkfj",),
    "PrivateKeyDetector": ("private key", "putty-user-key-file"),
    "PypiTokenDetector": ("pypi-age",),
    "SendGridDetector": ("sg.",),
    "SlackDetector": ("xox", "hooks.slack.com"),
    "SoftlayerDetector": ("softlayer", "sl"),
    "SquareOAuthDetector": ("sq0csp-",),
    "StripeDetector": ("k_live_",),
    "TelegramBotTokenDetector": (":",),
}
_PLUGIN_KIND = {"PrivateKeyDetector": "private-key"}


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _compiles(pattern: str) -> bool:
    options = re2.Options()
    options.log_errors = False  # a rule that does not compile is reported by us, not on stderr
    options.max_mem = 64 << 20
    try:
        re2.compile("(?m)" + pattern, options=options)
    except re2.error:
        return False
    return True


def plugin_rules() -> tuple[list[Rule], list[str]]:
    """detect-secrets' regex plugins as RE2 rules, and the patterns RE2 could not take."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    rules: list[Rule] = []
    refused: list[str] = []
    plugin_class: Any
    for plugin_class in get_mapping_from_secret_type_to_class().values():
        name = plugin_class.__name__
        if name in _SKIPPED_PLUGINS or not issubclass(plugin_class, RegexBasedDetector):
            continue
        plugin = plugin_class()
        kind = _PLUGIN_KIND.get(name) or _slug(str(plugin.secret_type))
        for regex in plugin.denylist:
            pattern = _LOOKAROUND.sub("", regex.pattern)
            pattern = re.sub(r"\{(\d+),(\d{4,})\}", lambda m: "{" + m.group(1) + ",1000}", pattern)
            flags = ("i" if regex.flags & re.IGNORECASE else "") + ("s" if regex.flags & re.DOTALL else "")
            pattern = f"(?{flags}){pattern}" if flags else pattern
            if not _compiles(pattern):
                refused.append(f"{name}: {regex.pattern[:80]}")
                continue
            rules.append(Rule(kind, pattern, _PLUGIN_KEYWORDS.get(name, ())))
    return rules, refused
