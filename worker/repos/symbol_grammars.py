"""Per-language tree-sitter grammars and queries: what counts as a definition or a reference.

Each definition pattern captures the defining node as @def and its name as @name; the kind
comes from the pattern. When two patterns claim the same name (`const f = () => 1` is both a
variable and a function), the more specific kind wins. References are the identifier nodes of
the grammar: comments and strings are separate nodes, so text in them never counts.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import tree_sitter
import tree_sitter_go
import tree_sitter_javascript
import tree_sitter_python
import tree_sitter_typescript

# Kinds that a more specific pattern may override for the same name.
_GENERIC_KINDS = {"variable", "type"}

_PYTHON = [
    ("class", "(class_definition name: (identifier) @name) @def"),
    ("function", "(function_definition name: (identifier) @name) @def"),
    ("variable", "(module (expression_statement (assignment left: (identifier) @name) @def))"),
    (
        "field",
        "(class_definition body: (block (expression_statement (assignment left: (identifier) @name) @def)))",
    ),
]
_JS_COMMON = [
    ("function", "(function_declaration name: (identifier) @name) @def"),
    ("function", "(generator_function_declaration name: (identifier) @name) @def"),
    ("class", "(class_declaration name: (_) @name) @def"),
    ("method", "(method_definition name: (_) @name) @def"),
    (
        "function",
        "(variable_declarator name: (identifier) @name"
        " value: [(arrow_function) (function_expression) (generator_function)]) @def",
    ),
    ("class", "(variable_declarator name: (identifier) @name value: (class)) @def"),
    ("variable", "(program (lexical_declaration (variable_declarator name: (identifier) @name) @def))"),
    (
        "variable",
        "(program (export_statement (lexical_declaration (variable_declarator name: (identifier) @name) @def)))",
    ),
    ("variable", "(program (variable_declaration (variable_declarator name: (identifier) @name) @def))"),
    (
        "function",
        "(assignment_expression left: (member_expression property: (property_identifier) @name)"
        " right: [(arrow_function) (function_expression)]) @def",
    ),
    (
        "method",
        "(pair key: (property_identifier) @name value: [(arrow_function) (function_expression)]) @def",
    ),
]
_JAVASCRIPT = [*_JS_COMMON, ("field", "(field_definition property: (_) @name) @def")]
_TYPESCRIPT = [
    *_JS_COMMON,
    ("field", "(public_field_definition name: (_) @name) @def"),
    ("interface", "(interface_declaration name: (type_identifier) @name) @def"),
    ("type", "(type_alias_declaration name: (type_identifier) @name) @def"),
    ("enum", "(enum_declaration name: (identifier) @name) @def"),
    ("class", "(abstract_class_declaration name: (type_identifier) @name) @def"),
    ("method", "(method_signature name: (_) @name) @def"),
    ("method", "(abstract_method_signature name: (_) @name) @def"),
    ("function", "(function_signature name: (identifier) @name) @def"),
    ("namespace", "(internal_module name: (_) @name) @def"),
    ("field", "(property_signature name: (_) @name) @def"),
]
_GO = [
    ("function", "(function_declaration name: (identifier) @name) @def"),
    ("method", "(method_declaration name: (field_identifier) @name) @def"),
    ("struct", "(type_spec name: (type_identifier) @name type: (struct_type)) @def"),
    ("interface", "(type_spec name: (type_identifier) @name type: (interface_type)) @def"),
    ("type", "(type_spec name: (type_identifier) @name) @def"),
    ("type", "(type_alias name: (type_identifier) @name) @def"),
    ("constant", "(source_file (const_declaration (const_spec name: (identifier) @name) @def))"),
    ("variable", "(source_file (var_declaration (var_spec name: (identifier) @name) @def))"),
    ("method", "(method_elem name: (field_identifier) @name) @def"),
    ("field", "(field_declaration name: (field_identifier) @name) @def"),
]
_JS_REFS = (
    "(identifier) (property_identifier) (shorthand_property_identifier)"
    " (shorthand_property_identifier_pattern) (private_property_identifier)"
)
# Node types that name an enclosing scope, and the field holding that name.
_CONTAINERS = {
    "class_definition",
    "class_declaration",
    "abstract_class_declaration",
    "interface_declaration",
    "internal_module",
    "type_spec",
}


@dataclass(frozen=True)
class Grammar:
    name: str
    family: str  # languages that use each other's names: references are matched within a family
    language: tree_sitter.Language
    definitions: list[tuple[str, str]]
    reference_types: str


GRAMMARS: dict[str, Grammar] = {
    "python": Grammar(
        "Python", "python", tree_sitter.Language(tree_sitter_python.language()), _PYTHON, "(identifier)"
    ),
    "javascript": Grammar(
        "JavaScript", "js", tree_sitter.Language(tree_sitter_javascript.language()), _JAVASCRIPT, _JS_REFS
    ),
    "typescript": Grammar(
        "TypeScript",
        "js",
        tree_sitter.Language(tree_sitter_typescript.language_typescript()),
        _TYPESCRIPT,
        _JS_REFS + " (type_identifier)",
    ),
    "tsx": Grammar(
        "TypeScript",
        "js",
        tree_sitter.Language(tree_sitter_typescript.language_tsx()),
        _TYPESCRIPT,
        _JS_REFS + " (type_identifier)",
    ),
    "go": Grammar(
        "Go",
        "go",
        tree_sitter.Language(tree_sitter_go.language()),
        _GO,
        "(identifier) (field_identifier) (type_identifier) (package_identifier)",
    ),
}
LANGUAGE_OF_SUFFIX = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
}


@dataclass(frozen=True)
class FoundDefinition:
    name: str
    kind: str
    container: str | None
    line: int
    end_line: int


@dataclass
class FileSymbols:
    language: str  # the display name: Python, JavaScript, TypeScript, Go
    family: str
    definitions: list[FoundDefinition] = field(default_factory=list)
    references: set[tuple[str, int]] = field(default_factory=set)  # (name, line), one per line


@functools.cache
def _queries(key: str) -> tuple[tree_sitter.Query, tree_sitter.Query, list[str]]:
    grammar = GRAMMARS[key]
    definitions = tree_sitter.Query(grammar.language, "\n".join(p for _, p in grammar.definitions))
    references = tree_sitter.Query(grammar.language, f"[{grammar.reference_types}] @ref")
    return definitions, references, [kind for kind, _ in grammar.definitions]


def _text(node: tree_sitter.Node | None) -> str:
    return (node.text or b"").decode("utf-8", errors="replace") if node is not None else ""


def _container(node: tree_sitter.Node, package: str | None) -> str | None:
    """The enclosing class/type/namespace, a Go method's receiver type, or a Go package."""
    if node.type == "method_declaration":
        receiver = node.child_by_field_name("receiver")
        types = [n for n in _walk(receiver) if n.type == "type_identifier"] if receiver else []
        return _text(types[0]) if types else None
    parent = node.parent
    while parent is not None:
        if parent.type in _CONTAINERS:
            return _text(parent.child_by_field_name("name")) or None
        if parent.type in ("function_definition", "function_declaration", "method_definition"):
            return None  # a local definition: its scope is a function, not worth naming
        parent = parent.parent
    return package


def _walk(node: tree_sitter.Node) -> list[tree_sitter.Node]:
    found = [node]
    for child in node.children:
        found.extend(_walk(child))
    return found


def grammar_of(path: str) -> str | None:
    """The grammar (a key of GRAMMARS) for a file name, by its suffix; None when we do not parse it."""
    name = path.rsplit("/", 1)[-1]
    return LANGUAGE_OF_SUFFIX.get(name[name.rfind(".") :].lower()) if "." in name else None


def parse_file(path: str, source: bytes) -> FileSymbols | None:
    """The definitions and references of one file, or None for a language we do not parse."""
    key = grammar_of(path)
    return None if key is None else parse_source(key, source)


def parse_source(key: str, source: bytes) -> FileSymbols:
    """The definitions and references of `source` parsed with the grammar `key`."""
    definitions_query, references_query, kinds = _queries(key)
    tree = tree_sitter.Parser(GRAMMARS[key].language).parse(source)
    root = tree.root_node
    package = None
    if key == "go":
        clause = next((c for c in root.children if c.type == "package_clause"), None)
        package = _text(clause.named_children[0]) if clause and clause.named_children else None
    chosen: dict[int, tuple[str, tree_sitter.Node, tree_sitter.Node]] = {}
    for pattern, captures in tree_sitter.QueryCursor(definitions_query).matches(root):
        name_node, def_node = captures["name"][0], captures["def"][0]
        kind = kinds[pattern]
        earlier = chosen.get(name_node.start_byte)
        if earlier is None or (earlier[0] in _GENERIC_KINDS and kind not in _GENERIC_KINDS):
            chosen[name_node.start_byte] = (kind, name_node, def_node)
    result = FileSymbols(language=GRAMMARS[key].name, family=GRAMMARS[key].family)
    for kind, name_node, def_node in chosen.values():
        container = _container(def_node, package)
        if kind == "function" and def_node.type == "function_definition" and _in_class_body(def_node):
            kind = "method"
        result.definitions.append(
            FoundDefinition(
                _text(name_node), kind, container, def_node.start_point[0] + 1, def_node.end_point[0] + 1
            )
        )
    for node in tree_sitter.QueryCursor(references_query).captures(root).get("ref", []):
        if node.start_byte not in chosen and (node.parent is None or node.parent.type != "package_clause"):
            result.references.add((_text(node), node.start_point[0] + 1))
    return result


def _in_class_body(node: tree_sitter.Node) -> bool:
    parent = node.parent
    if parent is not None and parent.type == "decorated_definition":
        parent = parent.parent
    return (
        parent is not None
        and parent.type == "block"
        and (parent.parent is not None and parent.parent.type == "class_definition")
    )
