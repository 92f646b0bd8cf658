"""Citations of history: `[repo@sha]` and `[repo@sha:path#L..]` are linked only when a tool showed
them this question; links take each forge's shapes, set by the `forge` key for self-hosted forges."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from config.errors import ConfigError
from config.repos import RepoSpec, load_whitelist
from tests.support.history_repo import Mirrored, build_history_repo, mirrored
from worker.agent.citations import check_answer
from worker.agent.links import commit_url, file_url
from worker.tools import build_registry
from worker.tools.context import ToolContext

REGISTRY = build_registry()
SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mirrored]:
    history = build_history_repo(tmp_path_factory.mktemp("history"))
    with mirrored(history, tmp_path_factory.mktemp("mirror")) as served:
        yield served


def asked(app: Mirrored, *calls: tuple[str, dict[str, object]]) -> ToolContext:
    ctx = app.context()
    for name, arguments in calls:
        assert REGISTRY.call(ctx, name, {"repo": "app", **arguments}).ok
    return ctx


def test_a_commit_a_tool_showed_is_linked_and_listed_under_sources(app: Mirrored) -> None:
    sha = app.repo.shas["raise"]
    ctx = asked(app, ("log", {"path": "src/retry.py"}))

    checked = check_answer(ctx, f"Alan raised it for flaky networks [app@{sha[:7]}].")

    url = f"https://github.com/acme/app/commit/{sha}"
    assert f"[app@{sha[:7]}]({url})" in checked.markdown
    assert checked.unverified == 0 and f"- [app@{sha[:7]}]({url})" in checked.markdown
    assert checked.sources[0].commit == sha


def test_a_commit_no_tool_showed_or_that_does_not_exist_is_not_linked(app: Mirrored) -> None:
    ctx = asked(app, ("log", {"path": "README.md"}))  # lists tidy and add, not raise
    raise_sha = app.repo.shas["raise"]

    checked = check_answer(ctx, f"See [app@{raise_sha[:10]}], [app@deadbeef00] and [other@{raise_sha[:7]}].")

    assert checked.unverified == 3 and checked.sources == []
    assert f"`app@{raise_sha[:10]}` (unverified)" in checked.markdown


def test_lines_of_a_file_at_a_commit_are_linked_only_when_a_tool_showed_them(app: Mirrored) -> None:
    sha = app.repo.shas["raise"]
    ctx = asked(app, ("show", {"sha": sha, "path": "src/retry.py"}))  # shows lines 1-6 after the commit

    checked = check_answer(
        ctx, f"It became 5 [app@{sha[:7]}:src/retry.py#L3] (not [app@{sha[:7]}:src/retry.py#L9-L12])."
    )

    assert (
        f"[app@{sha[:7]}:src/retry.py#L3](https://github.com/acme/app/blob/{sha}/src/retry.py#L3)"
        in checked.markdown
    )
    assert checked.unverified == 1 and f"`app@{sha[:7]}:src/retry.py#L9-L12` (unverified)" in checked.markdown
    assert checked.sources[0].label == f"app:src/retry.py:3 @ {sha[:7]}"


def test_lines_before_a_change_are_citable_at_the_parent_commit(app: Mirrored) -> None:
    parent = app.repo.shas["secrets"]
    ctx = asked(app, ("show", {"sha": app.repo.shas["raise"], "path": "src/retry.py"}))

    checked = check_answer(ctx, f"It was 3 [app@{parent[:7]}:src/retry.py#L3].")

    assert checked.unverified == 0 and f"/blob/{parent}/src/retry.py#L3)" in checked.markdown


def test_the_snapshots_own_commit_cites_lines_read_as_usual_and_model_made_links_are_replaced(
    app: Mirrored,
) -> None:
    snapshot = app.snapshot.sha
    ctx = asked(
        app, ("read_file", {"path": "src/retry.py", "start_line": 1, "end_line": 5}), ("log", {"limit": 1})
    )

    checked = check_answer(
        ctx, f"[app@{snapshot[:7]}:src/retry.py#L3] and [app@{snapshot[:7]}](https://evil.example/x)"
    )

    assert checked.unverified == 0 and "evil.example" not in checked.markdown
    assert f"(https://github.com/acme/app/commit/{snapshot})" in checked.markdown


def test_a_commit_citation_without_a_web_url_is_a_plain_label(app: Mirrored) -> None:
    sha = app.repo.shas["add"]
    ctx = asked(app, ("log", {}))
    plain = RepoSpec(name="app", url="/x", display_url="/x")
    ctx.snapshots["app"] = type(app.snapshot)(**{**app.snapshot.__dict__, "repo": plain})

    checked = check_answer(ctx, f"Added in [app@{sha[:7]}].")

    assert f"Added in `app@{sha[:7]}`." in checked.markdown and f"- `app@{sha[:7]}`" in checked.markdown


@pytest.mark.parametrize(
    ("forge", "web", "lines", "commit"),
    [
        ("github", "https://github.com/o/r", f"/blob/{SHA}/a%20b.py#L3-L5", f"/commit/{SHA}"),
        ("gitlab", "https://gitlab.com/g/r", f"/-/blob/{SHA}/a%20b.py#L3-5", f"/-/commit/{SHA}"),
        ("bitbucket", "https://bitbucket.org/t/r", f"/src/{SHA}/a%20b.py#lines-3:5", f"/commits/{SHA}"),
        ("gitea", "https://git.acme.dev/t/r", f"/src/commit/{SHA}/a%20b.py#L3-L5", f"/commit/{SHA}"),
        ("forgejo", "https://codeberg.org/t/r", f"/src/commit/{SHA}/a%20b.py#L3-L5", f"/commit/{SHA}"),
        (
            "azure",
            "https://dev.azure.com/o/p/_git/r",
            f"?path=/a%20b.py&version=GC{SHA}&line=3&lineEnd=5&lineStartColumn=1&lineEndColumn=1&lineStyle=plain&_a=contents",
            f"/commit/{SHA}",
        ),
    ],
)
def test_links_take_each_forges_shapes(forge: str, web: str, lines: str, commit: str) -> None:
    spec = RepoSpec(name="r", url="/x", display_url="/x", web_url=web, declared_forge=forge)

    assert (file_url(spec, SHA, "a b.py", 3, 5), commit_url(spec, SHA)) == (web + lines, web + commit)


def test_the_forge_key_gives_self_hosted_repos_their_links_and_is_checked(tmp_path: Path) -> None:
    repos = tmp_path / "repos.toml"
    repos.write_text(
        '[[repo]]\nname = "a"\nurl = "git@git.acme.dev:team/a.git"\nforge = "Gitea"\n\n'
        '[[repo]]\nname = "b"\nurl = "git@ssh.dev.azure.com:v3/org/proj/b"\n\n'
        '[[repo]]\nname = "c"\nurl = "https://codeberg.org/t/c.git"\n\n'
        '[[repo]]\nname = "d"\nurl = "https://git.acme.dev/t/d.git"\n'
    )
    a, b, c, d = load_whitelist(repos).repos

    assert (a.web_url, a.forge) == ("https://git.acme.dev/team/a", "gitea")
    assert (b.web_url, b.forge) == ("https://dev.azure.com/org/proj/_git/b", "azure")
    assert (c.web_url, c.forge) == ("https://codeberg.org/t/c", "forgejo")
    assert (d.web_url, d.forge) == (None, None)  # an unknown host without a forge key: no links
    repos.write_text('[[repo]]\nname = "a"\nurl = "."\nforge = "sourcehut"\n')
    with pytest.raises(
        ConfigError, match=rf"{repos}:1: forge 'sourcehut' of repo 'a' must be one of: github, gitlab"
    ):
        load_whitelist(repos)


def test_history_depth_in_the_repos_file_is_a_number_of_commits_or_all(tmp_path: Path) -> None:
    repos = tmp_path / "repos.toml"
    repos.write_text(
        '[[repo]]\nname = "a"\nurl = "."\nhistory_depth = "ALL"\n\n[[repo]]\nname = "b"\nurl = "."\nhistory_depth = 50\n'
    )
    assert [r.history_depth for r in load_whitelist(repos).repos] == [0, 50]
    for bad in ('"lots"', "0", "-3", "true", "1.5"):
        repos.write_text(f'[[repo]]\nname = "a"\nurl = "."\nhistory_depth = {bad}\n')
        with pytest.raises(
            ConfigError, match=r'history_depth of repo .a. must be a number of commits ≥ 1 or "all"'
        ):
            load_whitelist(repos)
