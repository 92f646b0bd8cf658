"""gitleaks' default rules (vendored in worker/repos/secrets/gitleaks/), as RE2 rules of our engine.

gitleaks (https://github.com/gitleaks/gitleaks) maintains the widest public set of secret shapes,
about 220 rule families, each with its keywords, an entropy floor and allowlists. Its rules are
Go `regexp` syntax, which is RE2's: every one compiles with google-re2 unchanged (the test
`tests/test_secrets_coverage.py` checks it), so the engine stays linear-time.

What is kept of gitleaks' semantics, per rule: `regex`, `secretGroup` (what is redacted),
`keywords` (the pre-filter), `entropy` (a floor on the secret's Shannon entropy), the rule's
allowlists (regexes over the secret, the match or the line; stop words), the global allowlist's
regexes and stop words, and the extra condition gitleaks puts on its generic rule (a digit).
What is not: path conditions (the redactor sees text, not paths: it redacts more, never less),
and the rule for `.p12` files, which has no regex (such files are binary and never shown).
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Any

from worker.repos.secrets.secret_rules import FIRST_GROUP, Allowlist, Rule

GITLEAKS_TOML = Path(__file__).with_name("gitleaks") / "gitleaks.toml"
# Our kinds for what the generic rule finds: a secret recognised by its name, not its shape.
GENERIC_KINDS = ("generic-api-key",)
# gitleaks rules whose secrets the engine finds by a pass of its own, more precisely: a
# private-key block line by line in any quoting (redaction.py), every value of a Kubernetes
# Secret, not only the first, keeping the keys' names (secret_blocks.py).
DONE_BY_THE_ENGINE = frozenset({"private-key", "kubernetes-secret-yaml"})


def _allowlist(entry: dict[str, Any]) -> Allowlist | None:
    """One gitleaks allowlist, or None when it needs a path (the redactor does not see paths)."""
    regexes = tuple(entry.get("regexes", ()))
    stopwords = tuple(entry.get("stopwords", ()))
    if entry.get("paths") and entry.get("condition", "OR").upper() == "AND":
        return None  # applies only to some paths: without the path, it would allow too much
    if not regexes and not stopwords:
        return None
    return Allowlist(entry.get("regexTarget", "secret"), regexes, stopwords)


def _rule(entry: dict[str, Any], global_allowlist: Allowlist | None) -> Rule | None:
    pattern = entry.get("regex")
    if not pattern or entry["id"] in DONE_BY_THE_ENGINE:
        return None
    allowlists = [a for a in map(_allowlist, entry.get("allowlists", ())) if a is not None]
    if global_allowlist is not None:
        allowlists.append(global_allowlist)
    rule_id = str(entry["id"])
    group = int(entry.get("secretGroup", 0)) or (FIRST_GROUP if _has_plain_group(pattern) else 0)
    return Rule(
        kind=rule_id,
        pattern=pattern,
        keywords=tuple(str(k).lower() for k in entry.get("keywords", ())),
        check="has-digit" if rule_id.startswith("generic") else None,
        group=group,
        entropy=float(entry.get("entropy", 0.0)),
        allowlists=tuple(allowlists),
    )


def _has_plain_group(pattern: str) -> bool:
    """Does the pattern have an unnamed capturing group (`(` not followed by `?`, not escaped)?"""
    escaped = False
    in_class = False
    for i, char in enumerate(pattern):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        elif char == "(" and not in_class and not pattern.startswith("?", i + 1):
            return True
    return False


@functools.cache
def gitleaks_rules() -> tuple[Rule, ...]:
    """Every regex rule of the vendored gitleaks configuration, in its order."""
    config = tomllib.loads(GITLEAKS_TOML.read_text(encoding="utf-8"))
    top = config.get("allowlist") or {}
    global_allowlist = _allowlist({"regexes": top.get("regexes", ()), "stopwords": top.get("stopwords", ())})
    rules = (_rule(entry, global_allowlist) for entry in config.get("rules", ()))
    return tuple(rule for rule in rules if rule is not None)
