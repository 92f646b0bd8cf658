"""The registry the model sees: the contract's tools and parameters, errors as text, capped output."""

from __future__ import annotations

import pytest

from tests.support.fixture_repos import Corpus, context
from worker.tools import build_registry
from worker.tools.repo_info import list_repos, repo_overview

CONTRACT = {
    "list_repos": (["query", "page"], []),
    "search": (["pattern", "repo", "glob", "ignore_case"], ["pattern"]),
    "read_file": (["repo", "path", "start_line", "end_line"], ["repo", "path"]),
    "list_files": (["repo", "path", "glob"], ["repo"]),
    "repo_overview": (["repo"], ["repo"]),
}


def test_the_schemas_have_exactly_the_contract_names_and_parameters() -> None:
    schemas = build_registry().schemas()
    # The contract's five first, in its order; more tools may follow (code navigation).
    assert [s["function"]["name"] for s in schemas][: len(CONTRACT)] == list(CONTRACT)
    for schema in schemas[: len(CONTRACT)]:
        function = schema["function"]
        params, required = CONTRACT[function["name"]]
        assert list(function["parameters"]["properties"]) == params
        assert function["parameters"]["required"] == required
        assert len(function["description"]) > 60 and "Args:" not in function["description"]
        assert all(p.get("description") for p in function["parameters"]["properties"].values())
    search = next(s for s in schemas if s["function"]["name"] == "search")["function"]["parameters"]
    assert search["properties"]["ignore_case"] == {**search["properties"]["ignore_case"], "default": False}


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("search", '{"pattern": ', "not valid JSON"),
        ("grep", "{}", "unknown tool 'grep'"),
        ("search", {"pattern": "x", "regex": "y"}, "unknown parameter 'regex'"),
        ("read_file", {"repo": "app"}, "missing required parameter 'path'"),
        ("read_file", {"repo": "nope", "path": "a"}, "repo 'nope' is not available"),
        ("read_file", {"repo": "app", "path": "a", "start_line": "ten"}, "must be integer"),
    ],
)
def test_bad_calls_come_back_as_error_text(
    corpus: Corpus, name: str, arguments: object, expected: str
) -> None:
    outcome = build_registry().call(context(corpus), name, arguments)  # type: ignore[arg-type]
    assert not outcome.ok and outcome.text.startswith("Error: ") and expected in outcome.text


def test_every_result_is_capped_at_the_output_limit_with_a_notice(corpus: Corpus) -> None:
    ctx = context(corpus, tool_output_max_chars=800, read_max_chars=5000)
    outcome = build_registry().call(ctx, "read_file", {"repo": "app", "path": "many.txt"})
    assert len(outcome.text) <= 800 and "call read_file with start_line=" in outcome.text
    listing = build_registry().call(
        context(corpus, tool_output_max_chars=500), "list_files", {"repo": "app", "glob": "*"}
    )
    assert len(listing.text) <= 500 and "[output cut:" in listing.text
    found = build_registry().call(ctx, "search", {"pattern": "needle"})
    assert len(found.text) <= 800 and f"Showing {len(found.data['matches'])} of more than 1,000" in found.text
    assert ctx.shown.covers("app", "many.txt", 1, len(found.data["matches"]))
    assert not ctx.shown.covers("app", "many.txt", 50, 50)


def test_list_repos_and_repo_overview_describe_the_snapshots(corpus: Corpus) -> None:
    ctx = context(corpus, "app", "sibling")
    repos = list_repos(ctx).data["repos"]
    assert [r["name"] for r in repos] == ["app", "sibling"]
    assert repos[0]["commit"] == corpus.app.sha[:7] and repos[0]["branch"] == "main"
    assert repos[0]["languages"][0] == "Python" and repos[0]["description"] == "a hostile app"
    overview = repo_overview(ctx, "app")
    assert "README.md (lines 1-5):" in overview.text and "It retries jobs." in overview.text
    assert "src/" in overview.data["top_level"] and overview.data["file_count"] == corpus.app.meta.file_count
    assert ctx.shown.covers("app", "README.md", 1, 5)
    short = repo_overview(context(corpus, overview_readme_chars=20), "app")
    assert "[README continues: read_file with path='README.md' start_line=" in short.text
