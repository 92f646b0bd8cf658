"""find_definition and find_references in every language navigation covers, on a real snapshot
of hand-written fixtures (tests/support/languages.py): a class-like and a function-like name at
their file and line, a use in another file, kinds and containers, families calling each other."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.settings import load_settings
from tests.support.fixture_repos import make_repo, snapshot_repo
from tests.support.languages import CASES, Case, Definition, language_files, line_of
from worker.repos.snapshot import Snapshot
from worker.repos.symbol_docs import documented, section
from worker.repos.symbol_grammars import GRAMMARS, grammar_of, kinds_of, parse_source
from worker.tools import build_registry, make_context

FILES = language_files()


@pytest.fixture(scope="module")
def polyglot(tmp_path_factory: pytest.TempPathFactory) -> Snapshot:
    base: Path = tmp_path_factory.mktemp("languages")
    make_repo(base / "repos" / "poly", FILES)
    return snapshot_repo(base / "repos" / "poly", "poly", base / "snapshots" / "poly", "every language")


def call(snapshot: Snapshot, tool: str, symbol: str) -> tuple[str, dict[str, object]]:
    ctx = make_context(load_settings(env_file=None), {"poly": snapshot})
    outcome = build_registry().call(ctx, tool, {"symbol": symbol})
    return outcome.text, dict(outcome.data or {})


def assert_found(snapshot: Snapshot, wanted: Definition) -> None:
    text, data = call(snapshot, "find_definition", wanted.symbol)
    line = line_of(FILES, wanted.path, wanted.snippet)
    name = wanted.symbol.rpartition(".")[2]
    hits = [d for d in data["definitions"] if d["path"] == wanted.path and d["line"] == line]  # type: ignore[attr-defined]
    assert hits, f"{wanted.symbol} not at {wanted.path}:{line}:\n{text}"
    assert hits[0]["kind"] == wanted.kind and hits[0]["name"] == name
    assert f"[poly:{wanted.path}#L{line}" in text


@pytest.mark.parametrize("case", CASES, ids=[c.language for c in CASES])
def test_a_class_like_definition_is_found_at_its_file_and_line(polyglot: Snapshot, case: Case) -> None:
    assert_found(polyglot, case.type_like)


@pytest.mark.parametrize("case", CASES, ids=[c.language for c in CASES])
def test_a_function_like_definition_is_found_at_its_file_and_line(polyglot: Snapshot, case: Case) -> None:
    assert_found(polyglot, case.function_like)


@pytest.mark.parametrize("case", CASES, ids=[c.language for c in CASES])
def test_a_call_site_in_another_file_is_a_reference(polyglot: Snapshot, case: Case) -> None:
    name = case.function_like.symbol.rpartition(".")[2]

    text, data = call(polyglot, "find_references", name)

    paths = {r["path"] for r in data["references"]}  # type: ignore[attr-defined]
    assert case.used_in in paths, text
    assert case.used_in != case.function_like.path


@pytest.mark.parametrize(
    ("symbol", "shown"),
    [
        ("Checkout.constructor", "constructor Checkout.constructor (Kotlin)"),
        ("Checkout.attempts", "property Checkout.attempts (Kotlin)"),
        ("Order.Customer", "property Order.Customer (C#)"),
        ("Orders.Order", "class Shop.Orders.Order (C#)"),
        ("Order.MAX_ITEMS", "constant Order.MAX_ITEMS (Java)"),
        ("Status.OPEN", "constant Status.OPEN (Java)"),
        ("Order.new", "method Order.new (Rust)"),  # in `impl Order`
        ("tax.rate", "function tax.rate (Rust)"),  # a module's function stays a function
        ("Order.describe", "method Order.describe (Swift)"),  # in `extension Order`
        ("Order.init", "constructor Order.init (Swift)"),
        ("Order.lines", "property Order.lines (Ruby)"),  # attr_reader
        ("Order.initialize", "constructor Order.initialize (Ruby)"),
        ("Order.__construct", "constructor Order.__construct (PHP)"),
        ("Audited.audit", "method Audited.audit (PHP)"),  # in a trait
        ("Order.empty", "method Order.empty (Scala)"),  # in the companion object
        ("Cents", "type Cents (Scala)"),
        ("shop.Sku", "type shop.Sku (C++)"),
        ("Cart.Cart", "constructor Cart.Cart (C++)"),
        ("cents_t", "type cents_t (C/C++)"),
        ("TOTAL_OF", "macro TOTAL_OF (C/C++)"),
        ("REGISTRY", "variable REGISTRY (Shell)"),
    ],
)
def test_a_definition_says_its_kind_and_its_container(polyglot: Snapshot, symbol: str, shown: str) -> None:
    text, _ = call(polyglot, "find_definition", symbol)

    assert shown in text
    assert "nothing is defined in" not in text  # found by its qualified name, not despite it


def test_a_name_in_a_comment_or_a_string_is_never_a_reference(polyglot: Snapshot) -> None:
    _, data = call(polyglot, "find_references", "formatPrice")

    lines = sorted(r["line"] for r in data["references"] if r["path"] == "web/src/cart.ts")  # type: ignore[attr-defined]
    assert lines == [1, 6]  # the import and the call; line 5's comment and string are not uses
    _, java = call(polyglot, "find_references", "total")
    assert not any(
        r["path"] == "java/com/shop/orders/Order.java" and r["line"] == 5 for r in java["references"]
    )  # type: ignore[attr-defined]


def test_languages_of_one_family_find_each_others_names_and_no_others(polyglot: Snapshot) -> None:
    _, order_total = call(polyglot, "find_references", "order_total")
    _, retry = call(polyglot, "find_references", "retry")

    paths = {r["path"] for r in order_total["references"]}  # type: ignore[attr-defined]
    assert {"c/report.c", "cpp/cart.cpp", "c/orders.h"} <= paths  # C++ calls C; the header declares it
    # Python's `retry` is not Go's package `retry` (worker/main.go): another family
    assert {r["path"] for r in retry["references"]} == {"payments/retry.py", "payments/api.py"}  # type: ignore[attr-defined]


def test_every_kind_a_language_can_report_is_found_in_its_fixtures() -> None:
    found: dict[str, set[str]] = {}
    for path, text in FILES.items():
        key = grammar_of(path)
        if key is not None and isinstance(text, str):
            found.setdefault(key, set()).update(d.kind for d in parse_source(key, text.encode()).definitions)

    missing = {key: sorted(kinds_of(key) - found.get(key, set())) for key in GRAMMARS}
    assert {key: kinds for key, kinds in missing.items() if kinds} == {}
    assert len({g.name for g in GRAMMARS.values()} - {"C/C++"}) >= 15


def test_docs_tools_lists_the_languages_and_kinds_the_code_has() -> None:
    documented_now = documented((Path(__file__).resolve().parent.parent / "docs" / "tools.md").read_text())

    assert documented_now == section(), "run: python -m worker.repos.symbol_docs"
    for key, grammar in GRAMMARS.items():
        row = next(line for line in documented_now.splitlines() if line.startswith(f"| {grammar.name} |"))
        assert all(kind in row for kind in kinds_of(key)) and all(f"`{s}`" in row for s in grammar.suffixes)
