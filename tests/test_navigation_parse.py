"""What one file's parse yields (worker/repos/symbol_grammars.py `parse_source`): names paired
with the definitions around them, containers, and references, in the cases its one query pass
and its sweeps over the captured nodes must get right."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from worker.repos.symbol_grammars import FoundDefinition, parse_source


def definitions(key: str, source: str) -> list[tuple[object, ...]]:
    return [tuple(d) for d in parse_source(key, source.encode()).definitions]


def test_nested_definitions_of_one_kind_each_keep_their_own_lines_and_container() -> None:
    java = "class Outer {\n  class Inner {\n    void deep() {}\n  }\n  void shallow() {\n    Runnable r = () -> {};\n  }\n}\n"
    js = "const outer = () => {\n  const inner = () => 1;\n  return inner();\n};\n"

    assert definitions("java", java) == [
        ("Outer", "class", None, 1, 8),
        ("Inner", "class", "Outer", 2, 4),
        ("deep", "method", "Inner", 3, 3),
        ("shallow", "method", "Outer", 5, 7),
    ]
    assert definitions("javascript", js) == [
        ("outer", "function", None, 1, 4),
        ("inner", "function", None, 2, 2),
    ]


def test_a_name_two_patterns_claim_takes_the_kind_listed_first() -> None:
    source = "const total = () => 1;\nconst rate = 2;\nexport const tax = function () {};\n"

    found = parse_source("javascript", source.encode()).definitions

    assert found == [
        FoundDefinition("total", "function", None, 1, 1),
        FoundDefinition("rate", "variable", None, 2, 2),
        FoundDefinition("tax", "function", None, 3, 3),
    ]


def test_names_declared_together_are_each_a_definition_of_their_own_kind() -> None:
    go = "package shop\n\ntype Point struct {\n\tX, Y int\n\tLabel string\n}\n"
    java = "class Box {\n  int width, height;\n  static final int MAX = 9, MIN = 1;\n}\n"

    assert definitions("go", go) == [
        ("Point", "struct", "shop", 3, 6),
        ("X", "field", "Point", 4, 4),
        ("Y", "field", "Point", 4, 4),
        ("Label", "field", "Point", 5, 5),
    ]
    assert definitions("java", java) == [
        ("Box", "class", None, 1, 4),
        ("width", "field", "Box", 2, 2),
        ("height", "field", "Box", 2, 2),
        ("MAX", "constant", "Box", 3, 3),
        ("MIN", "constant", "Box", 3, 3),
    ]


def test_a_use_on_the_line_of_its_own_definition_is_still_a_reference() -> None:
    python = "def countdown(n): return countdown(n - 1) if n else 0\n\ncountdown(3)\n"

    symbols = parse_source("python", python.encode())

    assert [d.name for d in symbols.definitions] == ["countdown"]
    assert {("countdown", 1), ("countdown", 3), ("n", 1)} <= symbols.references


def test_a_definition_is_not_a_reference_to_itself() -> None:
    symbols = parse_source("go", b"package shop\n\nfunc Total() int { return 1 }\n\nvar x = Total()\n")

    assert ("Total", 3) not in symbols.references
    assert ("Total", 5) in symbols.references
    assert ("shop", 1) not in symbols.references  # the package clause names the package


def test_names_outside_ascii_are_read_whole_on_their_lines() -> None:
    source = "# Grüße\ndef größe():\n    return 1\n\nx = größe()\ncafé = 'é'\n"

    symbols = parse_source("python", source.encode())

    assert [(d.name, d.line) for d in symbols.definitions] == [("größe", 2), ("x", 5), ("café", 6)]
    assert ("größe", 5) in symbols.references
    assert not any(name == "Grüße" for name, _ in symbols.references)  # a comment is no reference


def test_files_parsed_at_once_in_several_threads_get_the_symbols_of_a_lone_parse() -> None:
    sources = [
        ("java", "class Order {\n  int total() { return price(); }\n}\n" * (n + 1)) for n in range(4)
    ] + [
        ("javascript", "const rate = () => 2;\nexport const tax = rate() * 3;\n" * (n + 1)) for n in range(4)
    ]
    alone = [parse_source(key, text.encode()) for key, text in sources]

    with ThreadPoolExecutor(max_workers=8) as pool:  # each thread keeps its own query cursors
        together = list(pool.map(lambda job: parse_source(job[0], job[1].encode()), sources * 4))

    assert together == alone * 4
