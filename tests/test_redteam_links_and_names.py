"""Red team, the edges of the secret verdict: a symlink whose blob is a secret file's blob, and
file and folder names that hold tokens, probed by glob, by path and by "did you mean".

A symlink is a blob holding its target text: a link whose target text is a `.env`'s bytes *is*
that `.env`. A name holding a token is shown redacted (`docs/[REDACTED:github-token].md`), so
no filter the model controls may match its raw text: a right and a wrong guess of the token's
next character must get the same answer, that of a name that does not exist.

The repo is synced by the real Mirrors and read by the real tools through the registry."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.fixture_repos import git, make_repo
from tests.support.git_remote import make_mirrors
from worker.tools import build_registry, make_context
from worker.tools.context import ToolContext

REGISTRY = build_registry()
RELAY = "RELAY=relaymarker" + "Qz7" * 6  # a .env's whole content: no rule detects it, its name does
GITHUB = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"  # a file name
AWS = "AKIA" + "QWERTYUIOPASDFGH"  # a folder name, and the target of a link


@dataclass
class Repo:
    context: ToolContext
    first: str  # the commit of the .env and the token-named files
    second: str  # the commit that deletes the .env and adds the links
    root: Path  # the served snapshot's folder

    def call(self, name: str, **arguments: object) -> tuple[bool, str]:
        outcome = REGISTRY.call(self.context, name, {"repo": "app", **arguments})
        return outcome.ok, outcome.text + "\n" + json.dumps(outcome.data)

    def text(self, name: str, **arguments: object) -> str:
        return self.call(name, **arguments)[1]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Repo]:
    root = tmp_path_factory.mktemp("names")
    source = root / "source"
    files = {".env": RELAY, f"docs/{GITHUB}.md": "hello from docs\n", f"{AWS}/readme.txt": "hi from aws\n"}
    first = make_repo(source, {**files, "README.md": "# app\n"})
    (source / ".env").unlink()
    second = make_repo(source, {}, links={"relay-link": RELAY, "aws-link": AWS})
    assert git(source, "rev-parse", "HEAD:relay-link") == git(source, "rev-parse", f"{first}:.env")
    mirrors = make_mirrors(root, [{"name": "app", "url": str(source), "branch": "main"}])
    assert mirrors.sync("app").ok
    with mirrors.lease(["app"]) as snapshots:
        context = make_context(mirrors.settings, {"app": snapshots["app"]})
        yield Repo(context, first, second, snapshots["app"].root)


def test_a_symlink_twin_of_a_secret_file_is_withheld_by_every_snapshot_tool(repo: Repo) -> None:
    shown = {
        "list_files": repo.text("list_files"),
        "read_file": repo.text("read_file", path="relay-link"),
        "search": repo.text("search", pattern="relaymarker|RELAY"),
        "blame": repo.text("blame", path="relay-link"),
    }
    links = [os.readlink(p) for p in repo.root.rglob("*") if p.is_symlink()]

    assert not any(RELAY in text for text in shown.values()) and RELAY not in links
    assert "relay-link  (35 B, withheld: never shown)" in shown["list_files"]
    assert "withheld: a secret file (by its name) in another commit" in shown["read_file"]
    assert shown["search"].startswith("No matches")
    assert "no lines to blame: it is withheld" in shown["blame"]


def test_a_symlink_twin_of_a_secret_file_shows_no_target_in_show_diff_or_log(repo: Repo) -> None:
    shown = [
        repo.call("show", sha=repo.second),
        repo.call("show", sha=repo.second, path="relay-link"),
        repo.call("diff", **{"from": repo.first, "to": repo.second}),
        repo.call("log", path="relay-link"),
        repo.call("log", query="relaymarker", match="diff"),
    ]

    text = "".join(text for _, text in shown)
    assert all(ok for ok, _ in shown)
    assert RELAY not in text and "Qz7Qz7" not in text  # (the log query echoes "relaymarker")
    assert "(none)" in shown[4][1]  # no commit: the link's target is no diff line
    assert text.count("symlink: (none) → (withheld: a secret file (by its name) in another commit)") >= 3


def test_a_symlink_whose_target_holds_a_token_is_withheld_as_a_file_of_that_content(repo: Repo) -> None:
    listed = repo.text("list_files")
    read = repo.text("read_file", path="aws-link")
    shown = repo.text("show", sha=repo.second, path="aws-link")

    assert "aws-link  (20 B, withheld: never shown)" in listed
    assert "withheld: a symlink whose target holds a secret" in read
    assert "symlink: (none) → (withheld: a symlink whose target holds a secret)" in shown
    assert AWS not in listed + read + shown


def _probe(repo: Repo, tool: str, right: str, wrong: str, **arguments: str) -> list[str]:
    """The answers to a right and a wrong guess ("{}" in each argument), each guess's own echo
    taken out."""
    answers = []
    for guess in (right, wrong):
        filled = {key: value.format(guess) for key, value in arguments.items()}
        answers.append(repo.text(tool, **filled).replace(guess, "Q"))
    return answers


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("list_files", {"glob": "docs/{}*"}),
        ("list_files", {"glob": "{}*"}),
        ("search", {"pattern": "hello|hi", "glob": "docs/{}*"}),
        ("search", {"pattern": "hello|hi", "glob": "{}*/**"}),
        ("search", {"pattern": "hello|hi", "glob": "!{}*"}),
    ],
)
def test_a_glob_probe_answers_a_right_and_a_wrong_guess_of_a_token_name_alike(
    repo: Repo, tool: str, arguments: dict[str, str]
) -> None:
    token = GITHUB if "docs" in str(arguments["glob"]) else AWS
    right, wrong = token[:9], token[:8] + "x"
    answers = _probe(repo, tool, right, wrong, **arguments)

    assert answers[0] == answers[1]
    assert token[:9] not in "".join(answers)


def test_a_glob_matches_token_named_files_by_the_names_the_tools_show(repo: Repo) -> None:
    listed = repo.text("list_files", glob="*REDACTED*")
    in_docs = repo.text("search", pattern="hello|hi", glob="docs/*")
    outside_docs = repo.text("search", pattern="hello|hi", glob="!docs/*")

    assert "files matching '*REDACTED*': 2" in listed and "docs/[REDACTED:github-token].md" in listed
    assert "hello from docs" in in_docs and "hi from aws" not in in_docs
    assert "hi from aws" in outside_docs and "hello from docs" not in outside_docs


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read_file", {"path": "docs/{}.md"}),
        ("blame", {"path": "docs/{}.md"}),
        ("log", {"path": "docs/{}.md"}),
        ("show", {"sha": "HEAD~1", "path": "docs/{}.md"}),
        ("list_files", {"path": "{}"}),
        ("read_file", {"path": "{}/readme.txt"}),
    ],
)
def test_a_path_naming_a_token_name_answers_as_a_path_that_does_not_exist(
    repo: Repo, tool: str, arguments: dict[str, str]
) -> None:
    token = GITHUB if "docs" in str(arguments["path"]) else AWS
    wrong = token[:-1] + ("Z" if token[-1] != "Z" else "Y")  # token-shaped: a wrong guess that redacts alike
    answers = _probe(repo, tool, token, wrong, **arguments)

    assert answers[0] == answers[1]
    assert token not in "".join(answers) and "hello from docs" not in answers[0]


def test_a_missing_path_close_to_a_token_name_gets_no_suggestion_that_tells_the_guess(repo: Repo) -> None:
    right, wrong = GITHUB[:16], GITHUB[:15] + "x"  # long enough for a close match by raw name
    answers = _probe(repo, "read_file", right, wrong, path="docs/{}")

    assert answers[0] == answers[1]
    assert "Did you mean" not in answers[0]
