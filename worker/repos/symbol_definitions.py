"""Each definition a grammar's patterns found, as the row the store keeps: its name, its kind
(a function inside a type is a method, a method named like its type a constructor), its enclosing
container and its lines. Run once per definition of every file indexed, so kept lean
(worker/repos/symbol_grammars.py `parse_source` calls it)."""

from __future__ import annotations

from typing import NamedTuple

import tree_sitter

from worker.repos.symbol_tree import container_name, name_of, text_of, walk

# Nodes whose body is local: a definition inside one is not named after an outer container.
LOCAL_SCOPES = {
    "function_definition", "function_declaration", "method_definition", "method_declaration",
    "function_item", "method", "singleton_method", "constructor_declaration", "init_declaration",
    "secondary_constructor", "arrow_function", "function_expression", "lambda_expression",
    "local_function_statement", "anonymous_function", "lambda_literal", "closure_expression",
}  # fmt: skip
# Methods that are constructors: by name, per grammar, or named like their type (Java, C#, C++).
CONSTRUCTOR_NAMES = {
    "python": "__init__", "ruby": "initialize", "php": "__construct", "javascript": "constructor",
    "typescript": "constructor", "tsx": "constructor", "scala": "this",
}  # fmt: skip
NAMED_LIKE_THEIR_TYPE = {"java", "csharp", "cpp", "h"}
_SEPARATORS = (":", ".", "\\")  # in a name that may carry a qualifier (`Cart::total`, `A.B`)

DefinitionRow = tuple[str, str, str | None, int, int]  # name, kind, container, line, end line


class FoundDefinition(NamedTuple):  # a definition row, named (for reading, not made while indexing)
    name: str
    kind: str
    container: str | None
    line: int
    end_line: int


def _container(
    parent: tree_sitter.Node | None,
    containers: dict[str, str],
    package: str | None,
    source: bytes,
    memo: dict[int, tuple[str | None, str]],
) -> tuple[str | None, str]:
    """The enclosing type or scope of a definition whose parent is `parent`, and which of the two
    it is ("type"/"scope"). `memo` remembers the answer for every node walked through, so a
    file's walks stay linear."""
    walked: list[int] = []
    result: tuple[str | None, str] = (package, "scope")
    while parent is not None:
        parent_id = parent.id
        known = memo.get(parent_id)
        if known is not None:
            result = known
            break
        walked.append(parent_id)
        parent_type = parent.type
        kind = containers.get(parent_type)
        if kind is not None and (name := container_name(parent, source)):
            result = (name, kind)
            break
        if parent_type in LOCAL_SCOPES:
            result = (None, "scope")  # a local definition: its scope is a function, not worth naming
            break
        parent = parent.parent
    for walked_id in walked:
        memo[walked_id] = result
    return result


def _receiver_type(node: tree_sitter.Node, source: bytes) -> tuple[str | None, str]:
    """A Go method's container: the type of its receiver (`func (o *Order) Total()`)."""
    receiver = node.child_by_field_name("receiver")
    types = [n for n in walk(receiver) if n.type == "type_identifier"] if receiver else []
    return (text_of(types[0], source) if types else None), "type"


def definition_rows(
    key: str,
    containers: dict[str, str],
    kinds: list[str],
    plain: bool,
    chosen: dict[int, tuple[int, tree_sitter.Node, tree_sitter.Node]],
    package: str | None,
    source: bytes,
) -> list[DefinitionRow]:
    """The rows of the definitions `chosen` (by their name's first byte: pattern, name node,
    defining node) in grammar `key`, whose patterns' kinds are `kinds`, and whose names are whole
    unless they hold a separator when `plain`. A name is sliced at its first byte, the container
    is looked up by the definition's parent before any walk, and the rows are plain tuples: a
    NamedTuple's `__new__` is Python code, and bytes' `in` raises and formats an error inside
    before it searches (each cost more than the rest of a row)."""
    rows: list[DefinitionRow] = []
    memo: dict[int, tuple[str | None, str]] = {}
    constructor, like_their_type = CONSTRUCTOR_NAMES.get(key), key in NAMED_LIKE_THEIR_TYPE
    colon, dot, backslash = _SEPARATORS
    for start, (pattern, name_node, def_node) in chosen.items():
        name, qualifier = source[start : name_node.end_byte].decode("utf-8", errors="replace"), None
        if not plain or colon in name or dot in name or backslash in name:
            name, qualifier = name_of(name_node, source)
        if key == "go" and def_node.type == "method_declaration":
            container, scope = _receiver_type(def_node, source)
        else:
            parent = def_node.parent
            known = memo.get(parent.id) if parent is not None else None
            container, scope = known or _container(parent, containers, package, source, memo)
        kind = kinds[pattern]
        if qualifier is not None and (kind not in ("namespace", "module") or container is None):
            container, scope = qualifier, ("type" if kind == "method" else scope)
        if kind == "function" and scope == "type":
            kind = "method"
        if kind == "method" and (name == constructor or (like_their_type and name == container)):
            kind = "constructor"
        rows.append((name, kind, container, def_node.start_point[0] + 1, def_node.end_point[0] + 1))
    return rows
