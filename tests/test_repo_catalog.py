"""Many repos: the system prompt stays the same size whatever the whitelist, the model finds repos
with list_repos' query (README words included), and list_repos pages instead of cutting."""

from __future__ import annotations

import json
from dataclasses import replace

from tests.support.fixture_repos import Corpus, context
from worker.agent.prompt import build_system_prompt
from worker.repos.snapshot import Snapshot
from worker.tools import build_registry
from worker.tools.context import ToolContext


def copies(snapshot: Snapshot, count: int) -> dict[str, Snapshot]:
    """`count` repos named svc-001…, each a real snapshot (the same files under another name)."""
    names = [f"svc-{n:03d}" for n in range(1, count + 1)]
    return {name: replace(snapshot, repo=replace(snapshot.repo, name=name)) for name in names}


def with_fleet(corpus: Corpus, count: int, *names: str) -> ToolContext:
    """A question's context over `names` of the corpus and `count` copies of its `sibling`."""
    ctx = context(corpus, *names)
    ctx.snapshots.update(copies(corpus.snapshots["sibling"], count))
    return ctx


def call(ctx: ToolContext, **arguments: object) -> str:
    outcome = build_registry().call(ctx, "list_repos", arguments)
    return outcome.text


def test_the_prompt_lists_5_repos_and_at_300_is_at_most_a_fifth_longer(corpus: Corpus) -> None:
    five, many = copies(corpus.app, 5), copies(corpus.app, 300)
    listed = build_system_prompt(five)
    assert all(f"- {name}: a hostile app" in listed for name in five)
    assert "top level: " in listed and "README.md" in listed
    catalog = build_system_prompt(many)
    assert "300 repositories" in catalog and "`list_repos`" in catalog and "`query`" in catalog
    assert not [name for name in many if f"- {name}:" in catalog]
    assert len(catalog) <= 1.2 * len(listed)
    schemas = len(json.dumps(build_registry().schemas()))  # the whole first request, too
    assert len(catalog) + schemas <= 1.2 * (len(listed) + schemas)


def test_a_query_finds_a_repo_by_words_of_its_readme_first_among_many(corpus: Corpus) -> None:
    ctx = with_fleet(corpus, 40, "app", "sibling")
    found = call(ctx, query="RETRIES jobs")  # app's README: "It retries jobs."; in no other field
    lines = found.splitlines()
    assert lines[0] == "1 of 42 repo(s) in scope match 'RETRIES jobs', best first:"
    assert lines[1].startswith("- app: a hostile app — branch main @ ") and len(lines) == 2
    by_name = call(ctx, query="sibling")  # the name first, then README words ("# Sibling")
    assert by_name.splitlines()[1].startswith("- sibling: the sibling repo")
    assert "42 of 42 repo(s) in scope match 'sibling'" in by_name and "page 1 of 3" in by_name


def test_a_query_never_finds_a_repo_outside_the_questions_scope(corpus: Corpus) -> None:
    ctx = with_fleet(corpus, 30, "sibling")  # app's snapshot is on disk, not in this scope
    for query in ("retries jobs", "app", "hostile", "src"):
        found = call(ctx, query=query)
        assert found.startswith(f"No repo in scope matches {query!r} (31 repo(s) in scope)")
        assert "app" not in found.replace(repr(query), "")
    assert build_registry().call(ctx, "list_repos", {"query": "app"}).ok


def test_list_repos_pages_45_repos_20_a_page_and_the_pages_add_up(corpus: Corpus) -> None:
    ctx = with_fleet(corpus, 44, "sibling")
    pages = [call(ctx, page=page) for page in (1, 2, 3)]
    assert pages[0].splitlines()[0] == (
        "45 repo(s) in scope; page 1 of 3, 20 per page (page=2 for the next):"
    )
    assert pages[1].splitlines()[0].startswith("45 repo(s) in scope; page 2 of 3, 20 per page")
    assert pages[2].splitlines()[0] == "45 repo(s) in scope; page 3 of 3, 20 per page:"
    rows = [line.split(":")[0][2:] for page in pages for line in page.splitlines()[1:]]
    assert [len(page.splitlines()) - 1 for page in pages] == [20, 20, 5]
    assert rows == sorted(ctx.snapshots) and len(set(rows)) == 45
    beyond = build_registry().call(ctx, "list_repos", {"page": 4})
    assert not beyond.ok and "there is no page 4: 45 repo(s) make 3 page(s) of 20" in beyond.text


def test_a_wrong_repo_name_among_300_is_answered_with_the_count_and_the_catalog_not_every_name(
    corpus: Corpus,
) -> None:
    ctx = with_fleet(corpus, 300, "app")
    wrong = build_registry().call(ctx, "read_file", {"repo": "svc-0001", "path": "README.md"})
    assert wrong.text.startswith("Error: repo 'svc-0001' is not available. Did you mean 'svc-001'?")
    assert "301 repos; find one with list_repos(query=...)" in wrong.text
    assert "svc-150" not in wrong.text and len(wrong.text) < 300
    few = build_registry().call(context(corpus, "app", "sibling"), "read_file", {"repo": "ap", "path": "x"})
    assert "Repos in scope: app, sibling" in few.text
