"""History is hostile input too: no secret of any commit comes out of log, blame, show or diff; a
query cannot test for a secret; secret files stay unreadable in every revision, renamed or deleted;
refs and paths never reach git as options, ranges or other objects."""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.git_remote import make_mirrors
from tests.support.history_repo import HistoryRepo, Mirrored, build_history_repo, mirrored
from worker.tools import build_registry, make_context

REGISTRY = build_registry()
PATHS = ["src/retry.py", "src/clients.py", "README.md", "keys/service.txt", "config/deploy-old.txt", "config"]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mirrored]:
    history = build_history_repo(tmp_path_factory.mktemp("history"))
    with mirrored(history, tmp_path_factory.mktemp("mirror")) as served:
        yield served


def outputs(app: Mirrored, calls: list[tuple[str, dict[str, object]]]) -> str:
    shown = []
    for name, arguments in calls:
        outcome = REGISTRY.call(app.context(), name, {"repo": "app", **arguments})
        shown.append(outcome.text + json.dumps(outcome.data))
    return "\n".join(shown)


def leaked(repo: HistoryRepo, text: str) -> list[str]:
    """Secrets (or any 16-character piece of one) found in `text`."""
    pieces = {secret[i : i + 16] for secret in repo.secrets for i in range(0, max(1, len(secret) - 15), 8)}
    return sorted(piece for piece in pieces if piece in text)


def test_no_secret_of_any_commit_comes_out_of_any_history_tool(app: Mirrored) -> None:
    shas = list(app.repo.shas.values())
    calls: list[tuple[str, dict[str, object]]] = [("log", {}), *(("log", {"path": p}) for p in PATHS)]
    calls += [("show", {"sha": sha}) for sha in shas]
    calls += [("show", {"sha": sha, "path": path}) for sha in shas for path in PATHS]
    calls += [("diff", {"from": a, "to": b}) for a, b in itertools.permutations(shas, 2)]
    calls += [("blame", {"path": path}) for path in ("src/retry.py", "src/clients.py", "README.md")]

    text = outputs(app, calls)

    assert leaked(app.repo, text) == []
    assert "deploy.pem" not in text and "FAVORITE" not in text
    assert (
        "[REDACTED:private-key]" in text and "withheld: a private key file" in text
    )  # there was something to hide


def test_a_query_cannot_tell_whether_a_secret_is_in_the_history(app: Mirrored) -> None:
    for secret in app.repo.secrets:
        for query, regex in (
            (secret[:12], False),
            (secret[-20:], False),
            (re.escape(secret[:10]) + ".*", True),
        ):
            found = REGISTRY.call(app.context(), "log", {"repo": "app", "query": query, "regex": regex})
            assert found.text.startswith("0 commit(s)"), (query, found.text)
    control = REGISTRY.call(app.context(), "log", {"repo": "app", "query": "boto3"})
    assert control.text.startswith("1 commit(s)") and app.repo.shas["add"][:10] in control.text


def test_secret_file_paths_are_refused_by_every_history_tool(app: Mirrored) -> None:
    sha = app.repo.shas["secrets"]
    calls = [
        ("log", {"path": ".env"}),
        ("log", {"path": "config/deploy.pem"}),
        ("show", {"sha": sha, "path": ".env"}),
        ("diff", {"from": "v1.0", "path": "config/./deploy.pem"}),
        ("blame", {"path": ".env"}),
        ("show", {"sha": sha, "path": "src/../.env"}),
        ("log", {"path": ".git/config"}),
    ]
    for name, arguments in calls:
        outcome = REGISTRY.call(app.context(), name, {"repo": "app", **arguments})
        assert not outcome.ok and ("not readable" in outcome.text or "'..' is not allowed" in outcome.text)
        assert leaked(app.repo, outcome.text) == []


def test_a_secret_file_deleted_or_renamed_to_an_ordinary_name_stays_hidden_in_every_commit(
    app: Mirrored,
) -> None:
    shas = app.repo.shas
    removed = outputs(app, [("show", {"sha": shas["remove"]})])  # renames deploy.pem to deploy-old.txt
    tidied = outputs(app, [("show", {"sha": shas["tidy"]})])  # deletes deploy-old.txt
    across = outputs(app, [("diff", {"from": shas["add"], "to": shas["remove"]})])

    assert "deploy-old" not in removed and "2 secret file(s) changed too" in removed
    assert (
        "config/deploy-old.txt (deleted)" in tidied
        and "a secret file (by its name) in another commit" in tidied
    )
    assert "config/deploy-old.txt (added)" in across and "in another commit" in across
    assert leaked(app.repo, removed + tidied + across) == []


def test_hostile_refs_never_reach_git_as_options_ranges_or_paths(app: Mirrored, tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    refs = [
        f"--output={target}", "-p", "HEAD:src/clients.py", "v1.0:.env", "HEAD..v1.0", "HEAD...v1.0",
        "main@{1}", "HEAD^{tree}", ":/Add", "HEAD~1 -- .env", "$(touch pwned)", "a\nb", "x" * 300,
        "refs/heads/../../etc", "HEAD^{/local}", "--all", "@{-1}", "HEAD\x00", "HEAD\n~1", "v1.0\n^",
    ]  # fmt: skip
    for ref in refs:
        for name, arguments in (("show", {"sha": ref}), ("diff", {"from": ref}), ("log", {"since": ref})):
            outcome = REGISTRY.call(app.context(), name, {"repo": "app", **arguments})
            assert not outcome.ok and "not something codebot can look up" in outcome.text, (
                name,
                ref,
                outcome.text,
            )
    odd = outputs(app, [("log", {"query": f"--output={target}"}), ("log", {"path": f"--output={target}"})])
    assert not target.exists() and "Error" not in odd


def test_a_path_is_taken_literally_never_as_a_git_pathspec(app: Mirrored) -> None:
    for path in (":(glob)**", "*", "src/*.py", ":!README.md", ":(exclude)src"):
        outcome = REGISTRY.call(app.context(), "log", {"repo": "app", "path": path})
        assert outcome.ok and outcome.text.startswith("0 commit(s)"), (path, outcome.text)


def test_show_of_a_commit_changing_many_large_files_reads_a_bounded_amount_and_says_what_it_left(
    tmp_path: Path,
) -> None:
    repo = HistoryRepo(tmp_path / "work", tmp_path / "remote.git")
    repo.work.mkdir(parents=True)
    repo.git("init", "-q", "-b", "main")
    repo.commit("base", "Ada", "Start", {"README.md": "# big\n"})
    rng = random.Random(5)
    for number in range(30):  # binary blobs: git prints one line each, yet each must be read whole
        (repo.work / f"blob{number:02d}.bin").write_bytes(b"\0" + rng.randbytes(40_000))
    repo.git("add", ".")
    repo.commit("big", "Grace", "Vendor thirty blobs", {})
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(repo.bare)], check=True)
    repo.git("push", "-q", str(repo.bare), "main")
    with mirrored(repo, tmp_path / "mirror") as served:
        ctx = served.context(history_output_max_bytes=100_000)
        outcome = REGISTRY.call(ctx, "show", {"repo": "app", "sha": repo.shas["big"]})

    assert outcome.ok and "30 file(s) changed" in outcome.text
    assert outcome.data["cut"] is True and len(outcome.data["files"]) < 10
    assert "more file(s) not shown" in outcome.text and "pass path" in outcome.text


def test_a_log_query_reads_a_bounded_amount_of_file_versions_and_says_it_stopped(tmp_path: Path) -> None:
    repo = HistoryRepo(tmp_path / "work", tmp_path / "remote.git")
    repo.work.mkdir(parents=True)
    repo.git("init", "-q", "-b", "main")
    rng = random.Random(6)
    key = "\n".join(
        ["-----" + "BEGIN OPENSSH PRIVATE KEY-----", "AAAA" * 16, "-----" + "END OPENSSH PRIVATE KEY-----"]
    )
    for number in range(
        12
    ):  # git finds each (the word is in it), yet each version is withheld, so read in vain
        padding = "\n".join("# " + rng.randbytes(30).hex() for _ in range(600))
        repo.commit(
            f"c{number}", "Ada", f"Change {number}", {f"keys/k{number}.txt": f"{key}\n# needle\n{padding}\n"}
        )
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(repo.bare)], check=True)
    repo.git("push", "-q", str(repo.bare), "main")
    with mirrored(repo, tmp_path / "mirror") as served:
        ctx = served.context(history_output_max_bytes=100_000)
        outcome = REGISTRY.call(ctx, "log", {"repo": "app", "query": "needle", "match": "diff"})

    assert outcome.ok and outcome.text.startswith("0 commit(s)")
    assert "the search stopped" in outcome.text and "narrow the search" in outcome.text


def test_a_secret_file_renamed_after_a_failed_scan_of_secret_files_is_still_never_shown(
    tmp_path: Path,
) -> None:
    repo = HistoryRepo(tmp_path / "work", tmp_path / "remote.git")
    repo.work.mkdir(parents=True)
    repo.git("init", "-q", "-b", "main")
    repo.commit("start", "Ada", "Start", {"README.md": "# app\n"})
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(repo.bare)], check=True)
    repo.git("push", "-q", str(repo.bare), "main")
    mirrors = make_mirrors(tmp_path / "m", [{"name": "app", "url": str(repo.bare), "branch": "main"}])
    assert mirrors.sync("app").ok
    marker = "envmarker" + "Qx7" * 6
    repo.commit("add", "Grace", "Add settings", {".env": f"FAVORITE={marker}\n"})
    repo.commit("rename", "Grace", "Keep settings as notes", {}, renames={".env": "notes.txt"})
    repo.commit("edit", "Grace", "Add a note", {"notes.txt": f"FAVORITE={marker}\nmore\n"})
    repo.git("push", "-q", str(repo.bare), "main")
    git_dir = next((tmp_path / "m").rglob("mirror.git"))
    (git_dir / f".codebot-secret-blobs.{os.getpid()}.tmp").mkdir()  # the scan of the new commits fails
    assert mirrors.sync("app").ok
    with mirrors.lease(["app"]) as snapshots:
        ctx = make_context(mirrors.settings, snapshots)
        shown = [
            REGISTRY.call(ctx, "show", {"repo": "app", "sha": repo.shas[name]}) for name in ("rename", "edit")
        ]

    assert all(outcome.ok for outcome in shown)
    assert not any(marker in outcome.text + json.dumps(outcome.data) for outcome in shown)
