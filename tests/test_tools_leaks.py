"""The hostile sweep: whatever the model asks, no byte of a secret or of /etc/passwd comes back."""

from __future__ import annotations

import json
from typing import Any

from tests.support.fixture_repos import TRAVERSAL_PATHS, Corpus, context, passwd_lines
from worker.tools import build_registry


def _calls(corpus: Corpus) -> list[tuple[str, dict[str, Any]]]:
    files = [path for path in TRAVERSAL_PATHS] + [
        "src/clients.py",
        ".env",
        "id_rsa",
        "config/server.pem",
        "etc_passwd",
        "sibling_notes",
        "env_link.txt",
    ]
    calls: list[tuple[str, dict[str, Any]]] = [("list_repos", {}), ("repo_overview", {"repo": "app"})]
    calls += [("read_file", {"repo": "app", "path": f}) for f in files]
    calls += [
        ("read_file", {"repo": "app", "path": "src/clients.py", "start_line": n, "end_line": n})
        for n in range(1, 31)
    ]
    calls += [
        ("list_files", {"repo": "app", "path": p}) for p in ["", "src", "sibling_dir", "config", "../sibling"]
    ]
    calls += [("list_files", {"repo": "app", "glob": g}) for g in ["*", "**/*", ".env", "*.pem"]]
    patterns = [
        "AKIA",
        "ghp_",
        "xox",
        "sk-",
        "PASSWORD",
        "PRIVATE KEY",
        "root:",
        "SIBLING",
        "[A-Za-z0-9+/]{40,}",
        "=",
    ]
    calls += [
        ("search", {"pattern": p, "glob": g}) for p in patterns for g in [None, "*", ".env", "**/*.pem"]
    ]
    return calls


def test_no_tool_call_ever_returns_a_planted_secret_or_a_byte_of_etc_passwd(corpus: Corpus) -> None:
    registry, ctx = build_registry(), context(corpus)  # the sibling repo is not in scope
    forbidden = corpus.secrets + passwd_lines()
    for name, arguments in _calls(corpus):
        outcome = registry.call(ctx, name, {k: v for k, v in arguments.items() if v is not None})
        everything = outcome.text + json.dumps(outcome.data, ensure_ascii=False)
        leaked = [secret[:12] for secret in forbidden if secret in everything]
        assert not leaked, (name, arguments, leaked)
        assert "Error: the tool failed unexpectedly" not in outcome.text, (name, arguments)


def test_secrets_in_ordinary_source_are_shown_as_markers_not_hidden_files(corpus: Corpus) -> None:
    outcome = build_registry().call(context(corpus), "read_file", {"repo": "app", "path": "src/clients.py"})
    for kind in ["aws-access-key", "github-token", "slack-token", "openai-key", "private-key"]:
        assert f"[REDACTED:{kind}]" in outcome.text
    assert "def client():" in outcome.text  # the rest of the file is intact
