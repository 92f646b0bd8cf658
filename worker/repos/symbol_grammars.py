"""Per-language tree-sitter grammars: which files each parses, and what a definition's kind,
container and references are.

The grammars come from the maintained per-language wheels (tree-sitter-java, …, pinned in
pyproject.toml); the definition patterns are ours (worker/repos/symbol_queries.py). References
are the identifier nodes of the grammar: comments and strings are separate nodes, so text in
them never counts. Languages that call each other share a family (Kotlin/Java/Scala, C/C++,
JavaScript/TypeScript), and references are matched within a family.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import tree_sitter
import tree_sitter_bash
import tree_sitter_c
import tree_sitter_c_sharp
import tree_sitter_cpp
import tree_sitter_go
import tree_sitter_java
import tree_sitter_javascript
import tree_sitter_kotlin
import tree_sitter_php
import tree_sitter_python
import tree_sitter_ruby
import tree_sitter_rust
import tree_sitter_scala
import tree_sitter_swift
import tree_sitter_typescript

from worker.repos import symbol_queries as q
from worker.repos.symbol_capture import CompiledQuery, capture, compile_query, definition_nodes
from worker.repos.symbol_definitions import (
    CONSTRUCTOR_NAMES,
    NAMED_LIKE_THEIR_TYPE,
    DefinitionRow,
    FoundDefinition,
    definition_rows,
)
from worker.repos.symbol_tree import identifier_rows, text_of

_JS_REFS = (
    "(identifier) (property_identifier) (shorthand_property_identifier)"
    " (shorthand_property_identifier_pattern) (private_property_identifier)"
)
_JS_CONTAINERS = {
    "class_declaration": "type",
    "class": "type",
    "abstract_class_declaration": "type",
    "interface_declaration": "type",
    "internal_module": "scope",
}
_C_CONTAINERS = {"struct_specifier": "type", "union_specifier": "type", "enum_specifier": "type"}
_CPP_REFS = "(identifier) (type_identifier) (field_identifier) (namespace_identifier)"
_CPP_CONTAINERS = {**_C_CONTAINERS, "class_specifier": "type", "namespace_definition": "scope"}


@dataclass(frozen=True)
class Grammar:
    name: str  # the language as people call it (and as repo_overview counts files)
    family: str  # languages that use each other's names: references are matched within a family
    language: tree_sitter.Language
    definitions: list[tuple[str, str]]
    references: str  # node types, or a whole query capturing @ref
    containers: dict[str, str]  # node type -> "type" (its functions are methods) or "scope"
    suffixes: tuple[str, ...]


def _grammar(
    name: str,
    family: str,
    load: Callable[[], Any],
    definitions: list[tuple[str, str]],
    references: str,
    containers: dict[str, str],
    suffixes: str,
) -> Grammar:
    language = tree_sitter.Language(load())
    return Grammar(name, family, language, definitions, references, containers, tuple(suffixes.split()))


_TS = tree_sitter_typescript
GRAMMARS: dict[str, Grammar] = {
    "python": _grammar(
        "Python", "python", tree_sitter_python.language, q.PYTHON, "(identifier)",
        {"class_definition": "type"}, ".py .pyi",
    ),
    "javascript": _grammar(
        "JavaScript", "js", tree_sitter_javascript.language, q.JAVASCRIPT, _JS_REFS, _JS_CONTAINERS,
        ".js .mjs .cjs .jsx",
    ),
    "typescript": _grammar(
        "TypeScript", "js", _TS.language_typescript, q.TYPESCRIPT, _JS_REFS + " (type_identifier)",
        _JS_CONTAINERS, ".ts .mts .cts",
    ),
    "tsx": _grammar(
        "TypeScript", "js", _TS.language_tsx, q.TYPESCRIPT, _JS_REFS + " (type_identifier)", _JS_CONTAINERS,
        ".tsx",
    ),
    "go": _grammar(
        "Go", "go", tree_sitter_go.language, q.GO,
        "(identifier) (field_identifier) (type_identifier) (package_identifier)", {"type_spec": "type"}, ".go",
    ),
    "java": _grammar(
        "Java", "jvm", tree_sitter_java.language, q.JAVA, "(identifier) (type_identifier)",
        {
            "class_declaration": "type", "interface_declaration": "type", "enum_declaration": "type",
            "record_declaration": "type", "annotation_type_declaration": "type",
        },
        ".java",
    ),
    "kotlin": _grammar(
        "Kotlin", "jvm", tree_sitter_kotlin.language, q.KOTLIN, "(identifier)",
        {"class_declaration": "type", "object_declaration": "type", "companion_object": "type"},
        ".kt .kts",
    ),
    "scala": _grammar(
        "Scala", "jvm", tree_sitter_scala.language, q.SCALA, "(identifier) (type_identifier)",
        {
            "class_definition": "type", "object_definition": "type", "trait_definition": "type",
            "enum_definition": "type",
        },
        ".scala",
    ),
    "csharp": _grammar(
        "C#", "dotnet", tree_sitter_c_sharp.language, q.CSHARP, "(identifier)",
        {
            "class_declaration": "type", "interface_declaration": "type", "struct_declaration": "type",
            "record_declaration": "type", "enum_declaration": "type", "namespace_declaration": "scope",
            "file_scoped_namespace_declaration": "scope",
        },
        ".cs",
    ),
    "c": _grammar(
        "C", "c", tree_sitter_c.language, q.C, "(identifier) (type_identifier) (field_identifier)",
        _C_CONTAINERS, ".c",
    ),
    "cpp": _grammar(
        "C++", "c", tree_sitter_cpp.language, q.CPP, _CPP_REFS, _CPP_CONTAINERS,
        ".cc .cpp .cxx .c++ .hpp .hh .hxx .h++ .ipp .inl",
    ),
    # A .h file may be C or C++: the C++ grammar reads both (the C one loses C++ classes).
    "h": _grammar("C/C++", "c", tree_sitter_cpp.language, q.CPP, _CPP_REFS, _CPP_CONTAINERS, ".h"),
    "rust": _grammar(
        "Rust", "rust", tree_sitter_rust.language, q.RUST, "(identifier) (type_identifier) (field_identifier)",
        {"impl_item": "type", "trait_item": "type", "mod_item": "scope", "struct_item": "type",
         "enum_item": "type", "union_item": "type"},
        ".rs",
    ),
    "ruby": _grammar(
        "Ruby", "ruby", tree_sitter_ruby.language, q.RUBY, "(identifier) (constant)",
        {"class": "type", "module": "scope"}, ".rb .rake .gemspec",
    ),
    "php": _grammar(
        "PHP", "php", tree_sitter_php.language_php, q.PHP, "(name)",
        {
            "class_declaration": "type", "interface_declaration": "type", "trait_declaration": "type",
            "enum_declaration": "type", "namespace_definition": "scope",
        },
        ".php",
    ),
    "swift": _grammar(
        "Swift", "swift", tree_sitter_swift.language, q.SWIFT, "(simple_identifier) (type_identifier)",
        {"class_declaration": "type", "protocol_declaration": "type"}, ".swift",
    ),
    "bash": _grammar(
        "Shell", "shell", tree_sitter_bash.language, q.BASH, "(command_name (word) @ref) (variable_name) @ref",
        {}, ".sh .bash",
    ),
}  # fmt: skip
LANGUAGE_OF_SUFFIX = {suffix: key for key, grammar in GRAMMARS.items() for suffix in grammar.suffixes}


@dataclass
class FileSymbols:
    language: str  # the display name: Python, Java, C++, …
    family: str
    # (name, kind, container, line, end line) per definition: plain tuples, as the store takes them
    found: list[DefinitionRow] = field(default_factory=list)
    # name -> -1, then the 0-based rows it is used on (worker/repos/symbol_tree.py `identifier_rows`)
    rows: dict[str, list[int]] = field(default_factory=dict)

    @property
    def references(self) -> set[tuple[str, int]]:
        """(name, line), one per line a name is used on."""
        return {(name, row + 1) for name, rows in self.rows.items() for row in rows[1:]}

    @property
    def definitions(self) -> list[FoundDefinition]:
        return [FoundDefinition(*row) for row in self.found]


@functools.cache
def _query(key: str) -> CompiledQuery:
    grammar = GRAMMARS[key]
    return compile_query(grammar.language, grammar.definitions, grammar.references)


@functools.cache
def _plain_names(key: str) -> bool:
    """Whether a name without a separator is the whole name: no node type of the grammar may
    qualify it (`qualified_identifier`: C++, Kotlin)."""
    return GRAMMARS[key].language.id_for_node_kind("qualified_identifier", True) is None


def kinds_of(key: str) -> set[str]:
    """Every kind of definition the grammar `key` can report (docs/tools.md lists them)."""
    grammar = GRAMMARS[key]
    kinds = {kind for kind, _ in grammar.definitions}
    if "function" in kinds and "type" in grammar.containers.values() and key != "c":  # C: no methods
        kinds.add("method")
    if key in CONSTRUCTOR_NAMES or key in NAMED_LIKE_THEIR_TYPE:
        kinds.add("constructor")
    return kinds


def grammar_of(path: str) -> str | None:
    """The grammar (a key of GRAMMARS) for a file name, by its suffix; None when we do not parse it."""
    name = path.rsplit("/", 1)[-1]
    return LANGUAGE_OF_SUFFIX.get(name[name.rfind(".") :].lower()) if "." in name else None


def parse_file(path: str, source: bytes) -> FileSymbols | None:
    """The definitions and references of one file, or None for a language we do not parse."""
    key = grammar_of(path)
    return None if key is None else parse_source(key, source)


def _package_clause(root: tree_sitter.Node) -> tree_sitter.Node | None:
    """A Go file's `package` clause: a top-level node, first but for comments, read with a cursor
    (`root.children` would make a Node object for every declaration of the file)."""
    cursor = root.walk()
    if not cursor.goto_first_child():
        return None
    while True:
        node = cursor.node
        if node is not None and node.type == "package_clause":
            return node
        if not cursor.goto_next_sibling():
            return None


def parse_source(key: str, source: bytes) -> FileSymbols:
    """The definitions and references of `source` parsed with the grammar `key`."""
    # Tens of thousands of small objects, none cyclic: the cycle collector would only rescan them.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse_source(key, source)
    finally:
        if enabled:
            gc.enable()


def _parse_source(key: str, source: bytes) -> FileSymbols:
    grammar = GRAMMARS[key]
    compiled = _query(key)
    root = tree_sitter.Parser(grammar.language).parse(source).root_node
    clause = _package_clause(root) if key == "go" else None
    package = text_of(clause.named_children[0], source) if clause and clause.named_children else None
    captures = capture(key, compiled, root)
    chosen = definition_nodes(captures, compiled)
    result = FileSymbols(language=grammar.name, family=grammar.family)
    result.found = definition_rows(
        key, grammar.containers, compiled.kinds, _plain_names(key), chosen, package, source
    )
    # `chosen` itself, not its keys(): `in` on a dict is the quicker of the two, once per identifier
    result.rows = identifier_rows(captures.get("ref", []), source, chosen)
    if package and clause is not None and package in result.rows:  # `package retry` names the
        clause_row = clause.start_point.row  # package, it does not use it
        rows = [row for row in result.rows[package] if row != clause_row]
        if len(rows) > 1:
            result.rows[package] = rows
        else:
            del result.rows[package]
    return result


# The wheels the grammars come from: their versions, and our patterns, decide what a parse yields.
GRAMMAR_PACKAGES = (
    "tree-sitter", "tree-sitter-python", "tree-sitter-javascript", "tree-sitter-typescript", "tree-sitter-go",
    "tree-sitter-java", "tree-sitter-kotlin", "tree-sitter-scala", "tree-sitter-c-sharp", "tree-sitter-c",
    "tree-sitter-cpp", "tree-sitter-rust", "tree-sitter-ruby", "tree-sitter-php", "tree-sitter-swift",
    "tree-sitter-bash",
)  # fmt: skip


def fingerprint() -> str:
    """What decides the symbols of a blob: the grammar wheels' versions and our patterns. The blob
    store starts a new generation when it changes (worker/repos/blobstore.py)."""
    digest = hashlib.sha256()
    for package in GRAMMAR_PACKAGES:
        try:
            digest.update(f"{package}={importlib.metadata.version(package)}\n".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{package}=?\n".encode())
    for key, grammar in sorted(GRAMMARS.items()):
        digest.update(
            repr((key, grammar.definitions, grammar.references, sorted(grammar.containers.items()))).encode()
        )
    return digest.hexdigest()
