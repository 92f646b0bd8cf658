"""Coverage measured against gitleaks: every rule family of its default configuration, in five
contexts, is redacted at ≥ 95 %; the documents the issue names are redacted whole; ordinary
code and data around them stay readable; and the real tools never show the corpus' secrets."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from tests.support.fixture_repos import make_repo
from tests.support.git_remote import make_mirrors
from tests.support.secret_corpus import CONTEXTS, all_contexts, formats, samples
from worker.repos.secrets.gitleaks_rules import DONE_BY_THE_ENGINE, GITLEAKS_TOML, gitleaks_rules
from worker.repos.secrets.redaction import get_redactor
from worker.tools import build_registry, make_context

SAMPLES = samples()


def test_every_regex_rule_of_gitleaks_compiles_with_re2_and_has_a_sample() -> None:
    config = tomllib.loads(GITLEAKS_TOML.read_text(encoding="utf-8"))
    with_regex = {rule["id"] for rule in config["rules"] if rule.get("regex")}
    assert len(with_regex) >= 220
    kept = {rule.kind for rule in gitleaks_rules()}
    assert kept | DONE_BY_THE_ENGINE == with_regex and len(DONE_BY_THE_ENGINE) == 2  # none refused by RE2
    assert {s.family for s in SAMPLES} == with_regex  # and the corpus has one sample of each
    assert {rule.kind for rule in get_redactor().rules} >= kept


@pytest.mark.parametrize("where", CONTEXTS)
def test_at_least_95_percent_of_gitleaks_families_are_redacted_in_each_context(where: str) -> None:
    redactor = get_redactor()
    redacted, missed = 0, []
    for sample in SAMPLES:
        for context, text in all_contexts(sample):
            if context != where:
                continue
            if sample.leaked(redactor.redact(text)):
                missed.append(sample.family)
            else:
                redacted += 1
    total = redacted + len(missed)
    assert total >= (100 if where == "alone" else 220)
    assert redacted / total >= 0.95, (where, missed)


@pytest.mark.parametrize("name", [name for name, _, _ in formats()])
def test_each_document_format_the_issue_names_is_redacted(name: str) -> None:
    document, secrets = next((doc, sec) for n, doc, sec in formats() if n == name)
    out = get_redactor().redact(document)
    assert out.count("\n") == document.count("\n")
    for secret in secrets:
        assert not any(secret[i : i + 8] in out for i in range(len(secret) - 7)), out


def test_a_kubernetes_secret_keeps_its_keys_and_a_configmap_beside_it_stays_readable() -> None:
    manifest = (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: app\ndata:\n  username: YWRtaW4=\n"
        "  tls.key: |\n    QUJDREVGR0hJSktMTU5PUA==\n    UVJTVFVWV1hZWg==\n"
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  color: blue\n"
    )
    out = get_redactor().redact(manifest)
    assert "  username: [REDACTED:kubernetes-secret]\n" in out and "  tls.key: |\n" in out
    assert "YWRtaW4" not in out and "QUJDREVG" not in out and "UVJTVFVW" not in out
    assert out.endswith("kind: ConfigMap\nmetadata:\n  name: app\ndata:\n  color: blue\n")
    assert out.count("\n") == manifest.count("\n")


def test_keys_that_only_may_hold_a_secret_keep_ordinary_values() -> None:
    code = (
        'PRIMARY_KEY = "user_id"\nsort_key: created_at\nCACHE_KEY = "users"\n'
        "ssh_pass = None\nMAX_PW_LENGTH = 64\n"
        '"value": "eu-west-1",\n"type": "string",\n"sensitive": false\n'
    )
    assert get_redactor().redact(code) == code


def test_the_real_tools_never_show_a_corpus_secret_from_a_notebook_a_manifest_or_a_state_file(
    tmp_path: Path,
) -> None:
    chosen = [
        s
        for s in SAMPLES
        if s.family
        in {
            "notion-api-token",
            "sourcegraph-access-token",
            "grafana-cloud-api-token",
            "sendinblue-api-token",
            "dynatrace-api-token",
            "hashicorp-tf-api-token",
            "1password-secret-key",
            "shippo-api-token",
        }
    ]
    assert len(chosen) == 8
    files = {f"notebooks/{s.family}.ipynb": dict(all_contexts(s))["notebook"] for s in chosen}
    # (names of letters, digits and "_" only: "ini_secret:.txt" or "passwd=.txt" read as an
    # assignment, so the tools show them redacted and no path can name them: visible_paths.py)
    files.update({f"docs/{re.sub(r'[^A-Za-z0-9]', '_', n)}.txt": doc for n, doc, _ in formats()})
    make_repo(tmp_path / "src", files)
    mirrors = make_mirrors(tmp_path, [{"name": "corpus", "url": str(tmp_path / "src")}])
    assert mirrors.sync("corpus").ok
    registry = build_registry()
    secrets = [p for s in chosen for p in s.random_parts if len(p) >= 8]
    secrets += [s for _, _, found in formats() for s in found]
    with mirrors.lease(["corpus"]) as snapshots:
        ctx = make_context(mirrors.settings, snapshots)
        calls = [("read_file", {"repo": "corpus", "path": path}) for path in sorted(files)]
        calls += [
            ("search", {"pattern": p}) for p in ["ntn_|sgp_|glc_|xkeysib-|dt0c01|atlasv1|A3-", "value", ":"]
        ]
        for name, arguments in calls:
            outcome = registry.call(ctx, name, arguments)
            shown = outcome.text + json.dumps(outcome.data, ensure_ascii=False)
            assert outcome.ok, (name, arguments, outcome.text)
            assert not [s[:6] for s in secrets if s[:12] in shown or s[-12:] in shown], (name, arguments)
