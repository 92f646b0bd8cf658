"""find_definition and find_references over a real snapshot of a Python/JS/TS/Go repo."""

from __future__ import annotations

import pytest

from config.settings import load_settings
from tests.support.fixture_repos import context, make_repo, shared_corpus, snapshot_repo
from tests.support.polyglot import POLYGLOT
from worker.agent.citations import check_answer
from worker.repos.snapshot import Snapshot
from worker.tools import ToolContext, build_registry, make_context


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Snapshot:
    base = tmp_path_factory.mktemp("polyglot")
    make_repo(base / "repos" / "shop", POLYGLOT)
    return snapshot_repo(base / "repos" / "shop", "shop", base / "snapshots" / "shop", "a shop")


def ctx_for(shop: Snapshot, **overrides: object) -> ToolContext:
    return make_context(load_settings(env_file=None, **overrides), {"shop": shop})


def call(ctx: ToolContext, name: str, **arguments: object) -> str:
    outcome = build_registry().call(ctx, name, dict(arguments))
    return outcome.text


def test_a_python_function_is_found_with_its_kind_range_and_first_lines(shop: Snapshot) -> None:
    ctx = ctx_for(shop, definition_preview_lines=3)

    text = call(ctx, "find_definition", symbol="retry")

    assert text.startswith("1 definition of 'retry':")
    assert "[shop:payments/retry.py#L6-L8]  function retry (Python), lines 6-13" in text
    assert "6│ def retry(call, attempts=MAX_ATTEMPTS):" in text and "8│     for attempt" in text
    assert "read_file path='payments/retry.py' start_line=9 end_line=13" in text
    assert ctx.shown.covers("shop", "payments/retry.py", 6, 8)
    assert not ctx.shown.covers("shop", "payments/retry.py", 9, 9)


def test_a_method_is_found_by_its_class_qualified_name(shop: Snapshot) -> None:
    text = call(ctx_for(shop), "find_definition", symbol="Queue.enqueue")

    assert "method Queue.enqueue (Python), lines 17-18" in text
    assert "17│     def enqueue(self, job):" in text
    classes = call(ctx_for(shop), "find_definition", symbol="Queue")
    assert "class Queue (Python), lines 16-18" in classes


def test_go_functions_methods_and_struct_types_are_found(shop: Snapshot) -> None:
    ctx = ctx_for(shop)

    function = call(ctx, "find_definition", symbol="retry.Do")
    method = call(ctx, "find_definition", symbol="Backoff.Next")
    struct = call(ctx, "find_definition", symbol="Backoff")

    assert "function retry.Do (Go), lines 18-28" in function
    assert "18│ func Do(fn func() error, attempts int) error {" in function
    assert "method Backoff.Next (Go), lines 12-15" in method
    assert "[shop:worker/retry/backoff.go#L6-L9]  struct retry.Backoff (Go), lines 6-9" in struct


def test_a_typescript_interface_class_and_a_javascript_arrow_function_are_found(shop: Snapshot) -> None:
    ctx = ctx_for(shop)

    interface = call(ctx, "find_definition", symbol="Shape")
    area = call(ctx, "find_definition", symbol="area")
    slugify = call(ctx, "find_definition", symbol="slugify", repo="shop")

    assert "interface Shape (TypeScript), lines 1-3" in interface
    assert "2 definitions of 'area'" in area
    assert "method Shape.area (TypeScript), line 2" in area
    assert "method Square.area (TypeScript), lines 7-9" in area
    assert "[shop:web/src/format.js#L5]  function slugify (JavaScript), line 5" in slugify


def test_references_span_files_and_skip_comments_strings_and_the_definition(shop: Snapshot) -> None:
    ctx = ctx_for(shop)

    text = call(ctx, "find_references", symbol="retry")

    assert text.startswith("3 line(s) using 'retry'") and "shop:payments/retry.py:6 left out" in text
    assert "shop:payments/api.py\n      1│ from payments.retry import Queue, retry" in text
    assert "      8│     return retry(lambda: card)" in text
    assert "shop:payments/retry.py\n     18│         return retry(lambda: job)" in text
    assert "comment" not in text and "retry later" not in text
    assert ctx.shown.covers("shop", "payments/api.py", 8, 8)


def test_typescript_and_go_references_are_found_in_other_files(shop: Snapshot) -> None:
    ctx = ctx_for(shop)

    square = call(ctx, "find_references", symbol="Square")
    do = call(ctx, "find_references", symbol="Do")

    assert "shop:web/src/main.ts\n      1│ import { Shape, Square }" in square
    assert "      7│ console.log(total([new Square(2)]));" in square
    assert "shop:worker/main.go\n      6│ \t_ = retry.Do(func() error { return nil }, 3)" in do


def test_an_unknown_symbol_gets_an_error_with_close_names_and_the_search_fallback(shop: Snapshot) -> None:
    outcome = build_registry().call(ctx_for(shop), "find_definition", {"symbol": "retyr"})

    assert not outcome.ok and outcome.text.startswith("Error: no definition of 'retyr' in repo shop.")
    assert "Did you mean: retry" in outcome.text and "use search" in outcome.text
    bad = build_registry().call(ctx_for(shop), "find_references", {"symbol": "def retry("})
    assert not bad.ok and "is not a symbol name" in bad.text
    unknown_repo = build_registry().call(ctx_for(shop), "find_definition", {"symbol": "x", "repo": "shp"})
    assert "Did you mean 'shop'?" in unknown_repo.text


def test_secret_files_and_gitignored_files_are_never_indexed(shop: Snapshot) -> None:
    for planted in ("planted_secret_function", "planted_key_loader", "generated_only"):
        outcome = build_registry().call(ctx_for(shop), "find_definition", {"symbol": planted})
        assert not outcome.ok and "no definition" in outcome.text
        assert "never indexed" not in outcome.text


def test_lines_shown_by_navigation_verify_as_citations_and_others_do_not(shop: Snapshot) -> None:
    ctx = ctx_for(shop)
    call(ctx, "find_definition", symbol="Backoff.Next")
    call(ctx, "find_references", symbol="charge")

    checked = check_answer(
        ctx, "Next doubles [shop:worker/retry/backoff.go#L12-L15]; Do [shop:worker/retry/backoff.go#L18-L20]."
    )

    assert checked.unverified == 1
    assert [(s.path, s.start, s.end) for s in checked.sources] == [("worker/retry/backoff.go", 12, 15)]


def test_an_unused_definition_is_reported_as_unused_not_as_an_error(shop: Snapshot) -> None:
    outcome = build_registry().call(ctx_for(shop), "find_references", {"symbol": "formatPrice"})

    assert outcome.ok
    assert outcome.text.startswith("'formatPrice' is defined at shop:web/src/format.js:1 but used nowhere")


def test_secrets_on_definition_lines_are_redacted(tmp_path_factory: pytest.TempPathFactory) -> None:
    corpus = shared_corpus(tmp_path_factory)  # the hostile repo: planted keys, symlinks out of it
    ctx = context(corpus)

    key_id = build_registry().call(ctx, "find_definition", {"symbol": "AWS_KEY_ID"}).text
    pem = build_registry().call(ctx, "find_definition", {"symbol": "PRIVATE_KEY"}).text
    uses = build_registry().call(ctx, "find_references", {"symbol": "Queue"}).text

    assert "variable AWS_KEY_ID (Python), line 3" in key_id and "[REDACTED" in key_id
    assert "variable PRIVATE_KEY (Python)" in pem and "[REDACTED:private-key]" in pem
    assert not any(secret in text for secret in corpus.secrets for text in (key_id, pem, uses))
