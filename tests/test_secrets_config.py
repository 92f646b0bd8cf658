"""Values in configuration files: a secret-named key's value is withheld whatever its entropy or
shape unless it is plainly a placeholder, and an unnamed key's random token is withheld, by every
tool (read_file, search, show, diff, log); source code keeps today's rules.

Planted values are assembled at run time, so this file holds no whole secret."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fixture_repos import _token, git, make_repo
from tests.support.git_remote import make_mirrors
from worker.tools import build_registry, make_context
from worker.tools.context import ToolContext

REGISTRY = build_registry()
ALGOLIA = _token(31, 40)  # a random 40-character token under a key that names only a service
INI_SECRET = "Hunter" + ".Horse"  # reads like a dotted name: code, to today's rules
PASSPHRASE = "correct horse" + " battery staple"
KUBE_TOKEN = "kubelet-" + "bootstrap.s3cr3t"
PROPERTIES_PASSWORD = "open sesame" + " 42"
DEV_PASSWORD = "Tr0ub4dor" + " and 3"
FILES = {
    "config/search.yaml": f"search:\n  index: products\n  algolia: {ALGOLIA}\n  replicas: 2\n",
    "config/mail.ini": f"[smtp]\nhost = mail.internal\nport = 25\nsecret = {INI_SECRET}\n",
    "config/app.yaml": f"name: shop\nworkers: 4\napi_token: {PASSPHRASE}  # rotate yearly\n",
    "config/deploy.yaml": (
        "clusters:\n- name: prod\n  server: https://k8s.internal\n"
        f"users:\n- name: deployer\n  user:\n    token: |\n      {KUBE_TOKEN}\n    namespace: shop\n"
    ),
    "config/db.properties": f"spring.datasource.url = jdbc:postgresql://db/shop\n"
    f"spring.datasource.password = {PROPERTIES_PASSWORD}\n",
    "config/dev.yaml": (
        "db_password: ${DB_PASSWORD}\nvault_token: '{{ vault_token }}'\nsecret: <your secret>\n"
        f"api_key: changeme\nauth: true\npwd: ~\nclient_secret: '***'\nadmin_password: {DEV_PASSWORD}\n"
    ),
    "src/search.py": (
        f'import os\n\nINDEX_URL = "https://search.internal/{ALGOLIA[:8]}"\n\n\n'
        "def headers(request):\n    token = request.token\n    return token\n"
    ),
}
PLANTED = [ALGOLIA, INI_SECRET, PASSPHRASE, KUBE_TOKEN, PROPERTIES_PASSWORD, DEV_PASSWORD]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ToolContext, dict[str, str]]]:
    """A repo whose first commit adds the config files, and whose second deletes search.yaml."""
    root = tmp_path_factory.mktemp("config")
    shas = {"add": make_repo(root / "src", FILES)}
    git(root / "src", "rm", "-q", "config/search.yaml")
    git(root / "src", "commit", "-q", "-m", "Drop the search settings")
    shas["remove"] = git(root / "src", "rev-parse", "HEAD")
    mirrors = make_mirrors(root, [{"name": "app", "url": str(root / "src")}])
    assert mirrors.sync("app").ok
    with mirrors.lease(["app"]) as snapshots:
        yield make_context(mirrors.settings, snapshots), shas


def shown(ctx: ToolContext, tool: str, **arguments: Any) -> str:
    outcome = REGISTRY.call(ctx, tool, {"repo": "app", **arguments})
    assert outcome.ok, (tool, arguments, outcome.text)
    return outcome.text + json.dumps(outcome.data, ensure_ascii=False)


def lines_of(ctx: ToolContext, path: str) -> list[str]:
    """The file's lines as read_file shows them."""
    outcome = REGISTRY.call(ctx, "read_file", {"repo": "app", "path": path})
    assert outcome.ok, outcome.text
    return [record["text"] for record in outcome.data["lines"]]


def test_a_random_token_under_a_service_named_key_in_a_deleted_file_is_withheld_by_show_diff_and_log(
    app: tuple[ToolContext, dict[str, str]],
) -> None:
    ctx, shas = app
    outputs = [
        shown(ctx, "show", sha=shas["add"]),
        shown(ctx, "show", sha=shas["remove"]),
        shown(ctx, "show", sha=shas["add"], path="config/search.yaml"),
        shown(ctx, "diff", **{"from": shas["add"], "to": shas["remove"]}),
        shown(ctx, "diff", **{"from": shas["remove"], "to": shas["add"]}),
    ]
    assert not [text for text in outputs if ALGOLIA[:12] in text or ALGOLIA[-12:] in text]
    assert all("algolia: [REDACTED:high-entropy-value]" in text for text in outputs[1:])
    assert "replicas: 2" in outputs[2]  # the rest of the file stays readable
    # log's query runs over the redacted changes: the raw value finds nothing, the marker does.
    assert shown(ctx, "log", query=ALGOLIA[:16], match="diff").startswith("0 commit(s)")
    assert shown(ctx, "log", query="high-entropy-value", match="diff").startswith("2 commit(s)")


def test_an_ini_secret_that_reads_like_a_name_is_withheld_and_search_cannot_find_it(
    app: tuple[ToolContext, dict[str, str]],
) -> None:
    ctx, _ = app
    assert lines_of(ctx, "config/mail.ini")[-1] == "secret = [REDACTED:secret-assignment]"
    assert "host = mail.internal" in lines_of(ctx, "config/mail.ini")
    for pattern in (INI_SECRET, "Hunter", "Horse"):
        found = REGISTRY.call(ctx, "search", {"repo": "app", "pattern": pattern})
        assert found.data["total"] == 0, pattern  # no match: right guesses look like wrong ones
    hit = shown(ctx, "search", pattern="secret = ")
    assert "secret = [REDACTED:secret-assignment]" in hit and INI_SECRET not in hit


def test_a_yaml_api_token_that_is_a_passphrase_is_withheld_whole_keeping_its_comment(
    app: tuple[ToolContext, dict[str, str]],
) -> None:
    ctx, _ = app
    lines = lines_of(ctx, "config/app.yaml")
    assert lines == ["name: shop", "workers: 4", "api_token: [REDACTED:secret-assignment]  # rotate yearly"]
    assert REGISTRY.call(ctx, "search", {"repo": "app", "pattern": "battery"}).data["total"] == 0


def test_a_token_under_a_kubeconfig_style_user_block_is_withheld_in_its_block_scalar(
    app: tuple[ToolContext, dict[str, str]],
) -> None:
    ctx, _ = app
    lines = lines_of(ctx, "config/deploy.yaml")
    assert lines[-4:] == [
        "  user:",
        "    token: |",
        "      [REDACTED:secret-assignment]",
        "    namespace: shop",
    ]
    assert "server: https://k8s.internal" in "\n".join(lines)
    assert KUBE_TOKEN not in shown(ctx, "search", pattern="bootstrap|kubelet")


def test_a_properties_password_with_spaces_is_withheld_whole(app: tuple[ToolContext, dict[str, str]]) -> None:
    ctx, _ = app
    assert lines_of(ctx, "config/db.properties") == [
        "spring.datasource.url = jdbc:postgresql://db/shop",
        "spring.datasource.password = [REDACTED:secret-assignment]",
    ]
    assert REGISTRY.call(ctx, "search", {"repo": "app", "pattern": "sesame"}).data["total"] == 0


def test_placeholders_stay_readable_while_the_real_password_beside_them_is_withheld(
    app: tuple[ToolContext, dict[str, str]],
) -> None:
    ctx, _ = app
    assert lines_of(ctx, "config/dev.yaml") == [
        "db_password: ${DB_PASSWORD}",
        "vault_token: '{{ vault_token }}'",
        "secret: <your secret>",
        "api_key: changeme",
        "auth: true",
        "pwd: ~",
        "client_secret: '***'",
        "admin_password: [REDACTED:secret-assignment]",
    ]


def test_source_code_keeps_todays_rules(app: tuple[ToolContext, dict[str, str]]) -> None:
    ctx, _ = app
    assert lines_of(ctx, "src/search.py") == FILES["src/search.py"].splitlines()
    assert not [secret for secret in PLANTED if secret in shown(ctx, "search", pattern=".")]


def test_the_secret_named_keys_and_placeholders_docs_list_are_the_codes(tmp_path: Path) -> None:
    from worker.repos.secrets.config_values import (
        ConfigValues,  # here: the other tests also run on older code
    )

    docs = (Path(__file__).parent.parent / "docs" / "security.md").read_text(encoding="utf-8")
    judge = ConfigValues()
    keys = re.search(r"Secret-named keys[^:]*: (.+)", docs)
    not_keys = re.search(r"Not secret-named[^:]*: (.+)", docs)
    assert keys and not_keys
    for key in re.findall(r"`([^`]+)`", keys.group(1)):
        assert judge.is_secret_key(key.encode()), key
    for key in re.findall(r"`([^`]+)`", not_keys.group(1)):
        assert not judge.is_secret_key(key.encode()), key
    placeholders = re.search(r"Placeholders[^:]*: (.+)", docs)
    assert placeholders
    for value in re.findall(r"`([^`]*)`", placeholders.group(1)):
        assert judge.spans(f"password: {value}\n".encode()) == [], value


def test_most_random_tokens_under_an_unnamed_key_are_withheld_and_names_are_not() -> None:
    from worker.repos.secrets.config_values import ConfigValues

    judge = ConfigValues()
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    for length in (24, 40, 64):
        tokens = [_token(seed, length, alphabet) for seed in range(200)]
        tokens = [t for t in tokens if t.lower() != t and t.upper() != t and any(c.isdigit() for c in t)]
        withheld = sum(bool(judge.spans(f"search:\n  algolia: {t}\n".encode())) for t in tokens)
        assert withheld >= 0.9 * len(tokens), (length, withheld, len(tokens))
    names = ["AwsEc2NetworkAclEntryList", "ListTagsForResource2020_05_31", "e3b0c44298fc1c149afbf4c8996fb924"]
    names += ["3f2504e0-4f89-41d3-9a0c-0305e82c3301", "sha512-" + _token(7, 40), "/v2/Repos/Builds/Item42"]
    assert [n for n in names if judge.spans(f"shape: {n}\n".encode())] == []
