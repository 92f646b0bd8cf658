"""Dump what the symbol index would hold for the navigation bench's corpora and tests/: the check
that a speed change to the per-blob parse changes nothing a user can see.

    .venv/bin/python bench/navigation_dump.py OUT [--cache DIR] [--mirrors DIR] [--tests DIR]

Every file of the 15 corpora of bench/navigation.py (fetched into --cache as that bench does)
and every file under --tests (default tests/) in a language we parse goes through what a blob
processor runs (worker/repos/blob_worker.py `_parse`); OUT gets one line per file, per
definition (name, kind, container, line, end line, in the order found) and per reference
(sorted). Dump before a change and after it, then `cmp` the two files. Keep a copy of tests/
from before the change and pass it as --tests when the change adds tests.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.navigation import collect
from bench.navigation_sources import SOURCES, fetch_or_fallback
from worker.repos.blob_worker import _parse as parse_units
from worker.repos.ref_lines import unpack_lines
from worker.repos.symbol_grammars import grammar_of


def dump_file(out: list[str], label: str, path: str, key: str, data: bytes) -> tuple[int, int]:
    """Appends one file's lines; returns (definitions, references)."""
    definitions = references = 0
    for grammar, (language, family, found, refs) in parse_units(data, [key]).items():
        out.append(f"F {label} {path} {grammar} {language} {family}")
        out.extend(f"D {definition!r}" for definition in found)
        pairs = sorted((name, line) for name, lines in refs.items() for line in unpack_lines(lines))
        out.extend(f"R {reference!r}" for reference in pairs)
        definitions, references = definitions + len(found), references + len(pairs)
    return definitions, references


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/navcache"))
    parser.add_argument("--mirrors", type=Path, default=None)
    parser.add_argument("--tests", type=Path, default=Path("tests"))
    options = parser.parse_args()
    lines: list[str] = []
    files = definitions = references = 0
    for wanted in SOURCES:
        source, folder = fetch_or_fallback(wanted, options.cache, options.mirrors)
        for path, (key, data) in collect(source, folder).files.items():
            found, refs = dump_file(lines, source.language, path, key, data)
            files, definitions, references = files + 1, definitions + found, references + refs
    for path in sorted(options.tests.rglob("*")):
        grammar = grammar_of(path.as_posix())
        if grammar is not None and path.is_file() and not path.is_symlink():
            relative = f"tests/{path.relative_to(options.tests).as_posix()}"
            found, refs = dump_file(lines, "tests", relative, grammar, path.read_bytes())
            files, definitions, references = files + 1, definitions + found, references + refs
    options.out.write_text("\n".join(lines) + "\n")
    print(f"{files} files, {definitions} definitions, {references} references -> {options.out}")


if __name__ == "__main__":
    main()
