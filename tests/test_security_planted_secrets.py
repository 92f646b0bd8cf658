"""80+ planted credentials of 40+ kinds: none comes out of a tool, `codebot tool`, the MCP server,
a progress line or a chat post, and search cannot be used as an oracle to spell one out."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fixture_repos import make_repo
from tests.support.git_remote import make_mirrors
from tests.support.mcp_rig import served_repo, stdio_client_for
from tests.support.model_server import text, tool_calls
from tests.support.planted import PlantedRepo, planted_repo
from tests.support.slack_rig import build_slack_rig
from worker.repos.mirrors import Mirrors
from worker.tools import build_registry, make_context

PLANTED = planted_repo()
PROJECT_ROOT = Path(__file__).resolve().parents[1]
REGISTRY = build_registry()


class Leaks:
    """Finds any planted value, or any 12-character piece of one, in a text."""

    def __init__(self, planted: PlantedRepo, piece: int = 12) -> None:
        self.values = planted.values
        self.pieces = {v[i : i + piece] for v in self.values for i in range(len(v) - piece + 1)}
        self.piece = piece

    def __call__(self, text: str) -> list[str]:
        found = [v[:8] + "…" for v in self.values if v in text]
        n = self.piece
        found += [
            f"piece {text[i : i + 6]}…" for i in range(len(text) - n + 1) if text[i : i + n] in self.pieces
        ][:1]
        return found


LEAKS = Leaks(PLANTED)


@pytest.fixture(scope="module")
def mirrors(tmp_path_factory: pytest.TempPathFactory) -> Mirrors:
    base = tmp_path_factory.mktemp("planted")
    make_repo(base / "vault-src", PLANTED.files)
    mirrors = make_mirrors(base, [{"name": "vault", "url": str(base / "vault-src")}])
    assert mirrors.sync("vault").ok
    return mirrors


def _calls() -> list[tuple[str, dict[str, Any]]]:
    paths = sorted(PLANTED.files)
    folders = sorted({p.rsplit("/", 1)[0] for p in paths if "/" in p})
    calls: list[tuple[str, dict[str, Any]]] = [("list_repos", {}), ("repo_overview", {"repo": "vault"})]
    calls += [("list_files", {"repo": "vault", "path": folder}) for folder in ["", *folders]]
    calls += [("list_files", {"repo": "vault", "glob": glob}) for glob in ["*", "**/*", ".*", "*.json"]]
    calls += [("read_file", {"repo": "vault", "path": path}) for path in paths]
    calls += [
        ("read_file", {"repo": "vault", "path": "src/clients.py", "start_line": n, "end_line": n})
        for n in range(1, 45)
    ]
    generic = [
        "password|secret|token|key",
        "BEGIN|END",
        "[A-Za-z0-9+/]{20,}",
        "://",
        "=",
        ":",
        "Bearer",
        "AKIA|ghp_|xox",
    ]
    # A prefix of each secret, as someone who knows how a token starts would try.
    prefixes = sorted({re.escape(value[:6]) for value in PLANTED.values})
    calls += [("search", {"pattern": p}) for p in generic + prefixes]
    calls += [
        ("search", {"pattern": "password", "glob": g})
        for g in [".envrc", "env.local", ".pgpass", "netrc", "**"]
    ]
    calls += [("find_definition", {"symbol": s}) for s in ["client", "key", "decode", "connect"]]
    calls += [("find_references", {"symbol": s}) for s in ["KEY", "JWT", "os"]]
    return calls


def test_the_fixture_plants_at_least_70_secrets_of_at_least_25_kinds() -> None:
    assert len(PLANTED.secrets) >= 70 and len(PLANTED.kinds) >= 25
    credential_files = {
        ".envrc",
        "env.local",
        ".flaskenv",
        ".pgpass",
        "netrc",
        ".aws/credentials",
        ".npmrc",
        ".yarnrc.yml",
    }
    assert credential_files <= {s.path for s in PLANTED.secrets}


def test_no_tool_call_shows_a_planted_secret_or_a_piece_of_one(mirrors: Mirrors) -> None:
    with mirrors.lease(["vault"]) as snapshots:
        ctx = make_context(mirrors.settings, snapshots)
        for name, arguments in _calls():
            outcome = REGISTRY.call(ctx, name, arguments)
            everything = outcome.text + json.dumps(outcome.data, ensure_ascii=False)
            assert not LEAKS(everything), (name, arguments, LEAKS(everything))
            assert "failed unexpectedly" not in outcome.text, (name, arguments)
        # The files whose whole content is a credential are withheld, and say so.
        kube = REGISTRY.call(ctx, "read_file", {"repo": "vault", "path": "deploy/kubeconfig"})
        assert "is withheld: a kubeconfig" in kube.text
        listing = REGISTRY.call(ctx, "list_files", {"repo": "vault"})
        assert (
            ".envrc" not in listing.text
            and "secret or credentials file(s) in this repo are withheld" in listing.text
        )


def test_ordinary_lines_around_the_secrets_stay_readable(mirrors: Mirrors) -> None:
    with mirrors.lease(["vault"]) as snapshots:
        ctx = make_context(mirrors.settings, snapshots)
        clients = REGISTRY.call(ctx, "read_file", {"repo": "vault", "path": "src/clients.py"}).text
        assert "AWS_ACCESS_KEY = '[REDACTED:aws-access-key]'" in clients and "def client():" in clients
        keys = REGISTRY.call(ctx, "read_file", {"repo": "vault", "path": "src/keys.py"}).text
        assert "def key():" in keys and "[REDACTED:private-key]" in keys
        yaml = REGISTRY.call(ctx, "read_file", {"repo": "vault", "path": "config/app.yaml"}).text
        assert "host: db.internal" in yaml and "password: [REDACTED:secret-assignment]" in yaml


def test_codebot_tool_prints_no_planted_secret(mirrors: Mirrors) -> None:
    data_dir = mirrors.settings.data_dir
    env = {
        **os.environ,
        "CODEBOT_DATA_DIR": str(data_dir),
        "CODEBOT_REPOS_FILE": str(data_dir.parent / "repos.toml"),
        "PYTHONPATH": str(PROJECT_ROOT),
    }
    for name, arguments in [
        ("read_file", {"repo": "vault", "path": "src/clients.py"}),
        ("search", {"pattern": "password|token|secret|BEGIN", "repo": "vault"}),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "codebot.cli", "tool", name, "--args", json.dumps(arguments)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "REDACTED" in done.stdout and not LEAKS(done.stdout + done.stderr)


@pytest.fixture(scope="module")
def mcp_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with served_repo(tmp_path_factory.mktemp("mcp-planted"), files=PLANTED.files) as served:
        yield served


def test_the_mcp_server_shows_no_planted_secret(mcp_served: Any) -> None:
    with stdio_client_for(mcp_served) as client:
        for path in sorted(PLANTED.files):
            reply, _error = client.tool("read_file", {"repo": "payments", "path": path})
            assert not LEAKS(reply), (path, LEAKS(reply))
        for pattern in ["password|secret|token|key", "[A-Za-z0-9+/]{20,}", "://"]:
            reply, _error = client.tool("search", {"pattern": pattern, "repo": "payments"})
            assert not LEAKS(reply), (pattern, LEAKS(reply))


def test_progress_lines_and_chat_posts_never_show_a_planted_secret(tmp_path: Path) -> None:
    github = next(s.value for s in PLANTED.secrets if s.kind == "github-pat")
    stripe = next(s.value for s in PLANTED.secrets if s.kind == "stripe-live")
    for rig in build_slack_rig(tmp_path, files=PLANTED.files):
        # A model that got hold of secrets anyway (say, guessed them) and repeats them everywhere.
        rig.model.enqueue(
            tool_calls(("search", {"pattern": github, "repo": "payments"})),
            tool_calls(("read_file", {"repo": "payments", "path": "src/clients.py"})),
            text(f"The token is {github} and the Stripe key is {stripe} [payments:src/clients.py#L5]."),
        )
        ts = rig.mention("what are the tokens?")
        rig.settle()
        rig.work()
        posts = [call.body.get("text", "") for call in rig.api.calls_to("chat.update")]
        posts += [call.body.get("text", "") for call in rig.api.calls_to("chat.postMessage")]
        assert any("searching" in post for post in posts)  # the progress line was shown…
        assert all(not LEAKS(post) for post in posts), [LEAKS(p) for p in posts]  # …without the token
        (reply,) = rig.api.thread_texts("C1", ts)
        assert "[REDACTED:github-token]" in reply and "[REDACTED:stripe" in reply


# --- the search oracle -----------------------------------------------------------------------

ORACLE_KINDS = [
    "github-pat",
    "aws-access-key",
    "slack-bot",
    "stripe-live",
    "yaml-unquoted",
    "url-password",
    "openai",
]


def _normalised(outcome: Any, pattern: str) -> str:
    """A search result with the pattern's own echo taken out, to compare two probes."""
    everything = outcome.text + json.dumps(outcome.data, sort_keys=True)
    for echo in (repr(pattern), json.dumps(pattern)[1:-1], pattern):
        everything = everything.replace(echo, "<PATTERN>")
    return everything


def test_a_search_cannot_tell_a_right_guess_of_a_secret_from_a_wrong_one(mirrors: Mirrors) -> None:
    with mirrors.lease(["vault"]) as snapshots:
        for kind in ORACLE_KINDS:
            secret = next(s for s in PLANTED.secrets if s.kind == kind)
            for known in (4, 8, 12, len(secret.value) - 1):
                right = secret.value[known]
                wrong = next(c for c in "ZQ7xk" if c != right)
                results = []
                for guess in (right, wrong):
                    prefix = re.escape(secret.value[:known] + guess)
                    for pattern in (prefix, prefix + "[0-9A-Za-z]", f"['\"=: ]{prefix}"):
                        ctx = make_context(mirrors.settings, snapshots)
                        outcome = REGISTRY.call(ctx, "search", {"pattern": pattern, "repo": "vault"})
                        results.append(_normalised(outcome, pattern))
                half = len(results) // 2
                assert results[:half] == results[half:], (kind, known)
                assert all('"total": 0' in r for r in results), (kind, known)
