"""Path security: every way out of a snapshot is refused with a message the model can act on."""

from __future__ import annotations

import pytest

from config.settings import load_settings
from tests.support.fixture_repos import TRAVERSAL_PATHS, Corpus, context, passwd_lines
from worker.tools import build_registry
from worker.tools.context import ToolError
from worker.tools.paths import resolve_path


@pytest.mark.parametrize("path", TRAVERSAL_PATHS)
def test_traversal_attempts_are_refused_by_every_path_tool_and_leak_nothing(
    corpus: Corpus, path: str
) -> None:
    registry, ctx = build_registry(), context(corpus, "app", "sibling")
    for tool, args in [
        ("read_file", {"repo": "app", "path": path}),
        ("list_files", {"repo": "app", "path": path}),
    ]:
        outcome = registry.call(ctx, tool, args)
        assert not outcome.ok and outcome.text.startswith("Error: ")
        assert any(
            word in outcome.text for word in ("not allowed", "absolute", "NUL", "longer", "does not exist")
        )
        assert not any(line in outcome.text for line in passwd_lines())


@pytest.mark.parametrize(
    "path", ["etc_passwd", "docs/passwd_link.md", "sibling_notes", "sibling_dir/notes.txt", "abs_sibling"]
)
def test_symlinks_leaving_the_snapshot_are_refused_even_into_a_sibling_repo(
    corpus: Corpus, path: str
) -> None:
    outcome = build_registry().call(
        context(corpus, "app", "sibling"), "read_file", {"repo": "app", "path": path}
    )
    assert outcome.text.startswith("Error: ") and "outside the repo" in outcome.text
    assert "SIBLING-ONLY" not in outcome.text


@pytest.mark.parametrize("path", [".git/config", ".GIT/HEAD", "src/.git/config", ".git", "./.Git/hooks"])
def test_the_git_folder_is_never_readable(corpus: Corpus, path: str) -> None:
    outcome = build_registry().call(context(corpus), "read_file", {"repo": "app", "path": path})
    assert outcome.text.startswith("Error: ") and ".git folder is not readable" in outcome.text


@pytest.mark.parametrize(
    "path", [".env", ".ENV", "id_rsa", "config/server.pem", "a/.env/x", ".aws/credentials"]
)
def test_secret_files_are_refused_by_name(corpus: Corpus, path: str) -> None:
    outcome = build_registry().call(context(corpus), "read_file", {"repo": "app", "path": path})
    assert outcome.text.startswith("Error: ")
    assert "not readable: matches secret file pattern" in outcome.text
    assert not any(secret in outcome.text for secret in corpus.secrets)


def test_a_link_to_a_secret_file_is_not_in_the_snapshot_at_all(corpus: Corpus) -> None:
    registry, ctx = build_registry(), context(corpus)
    outcome = registry.call(ctx, "read_file", {"repo": "app", "path": "env_link.txt"})
    assert outcome.text.startswith("Error: ") and "does not exist" in outcome.text
    listing = registry.call(ctx, "list_files", {"repo": "app", "glob": "*"})
    assert "env_link.txt" not in listing.text and ".env" not in listing.text


def test_paths_are_normalised_and_unicode_paths_resolve(corpus: Corpus) -> None:
    settings = load_settings(env_file=None)
    absolute, relative = resolve_path(corpus.app, "./src//数据.py", settings)
    assert relative == "src/数据.py" and absolute.read_text(encoding="utf-8").startswith("数据")
    assert resolve_path(corpus.app, ".", settings)[1] == ""
    # An in-repo link is readable under the name that was asked for.
    absolute, relative = resolve_path(corpus.app, "docs/readme-link.md", settings)
    assert relative == "docs/readme-link.md" and absolute.name == "README.md"
    with pytest.raises(ToolError, match="longer than 1024"):
        resolve_path(corpus.app, "a/" * 600, settings)
