"""Running a grammar's patterns over a parse tree: one query for the definitions and the
references, read with `QueryCursor.captures`, and each definition's name found: read from the
defining node's own field (`name:` of a method declaration), or else a captured name paired with
the definition around it. Used by worker/repos/symbol_grammars.py `parse_source`."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import tree_sitter

from worker.repos.symbol_tree import definition_pairs

# A pattern whose name is a field of the defining node itself, and nothing else is captured:
# `(method_declaration name: (identifier) @name) @def`, or the defining node nested in others,
# the name its last child: `(program (lexical_declaration (variable_declarator name: (identifier)
# @name) @def))`.
_NAME_FIELD = re.compile(r"\((\w+) (\w+): \((\w+)\) @name[ )][^@]*@def")
_NESTED_NAME_FIELD = re.compile(r"\((\w+) (\w+): \((\w+)\) @name\) @def\)*")


@dataclass(frozen=True)
class CompiledQuery:
    query: tree_sitter.Query  # the definition patterns but the file-level ones, and the references
    file_level: tree_sitter.Query | None  # the patterns anchored at the file's root node
    kinds: list[str]  # of the definition patterns, in their order
    # Per definition pattern i: the capture names of its name (None: read from the field) and
    # defining node, and the name's field on the defining node with the name's node type ("_":
    # any named node), or None.
    names: list[str | None]
    defining: list[str]
    name_fields: list[tuple[int, str] | None]
    pattern_of: dict[str, int]  # `def{i}` -> i


def _name_field(language: tree_sitter.Language, pattern: str) -> tuple[int, str] | None:
    """The field id of the name when pattern captures its name as a field of the defining node
    (and nothing else): the node then comes from `children_by_field_id`, and the engine captures
    one node per definition instead of two, with no pairing of the two lists afterwards."""
    if pattern.count("@") != 2:
        return None
    found = _NAME_FIELD.fullmatch(pattern)
    if found is None and (nested := _NESTED_NAME_FIELD.search(pattern)) and nested.end() == len(pattern):
        found = nested
    if found is None:
        return None
    field = language.field_id_for_name(found.group(2))
    return None if field is None else (field, found.group(3))


def compile_query(
    language: tree_sitter.Language, definitions: list[tuple[str, str]], references: str
) -> CompiledQuery:
    """One pass over the whole tree: the definition patterns and the references (a third faster
    than two passes). Pattern i captures `def{i}` (and `name{i}` unless the name is a field of the
    defining node), so that `QueryCursor.captures` (one list per capture name, no dict and no
    Python object per match: a sixth faster) still says which pattern found a name. The patterns
    anchored at the root node (`(program (lexical_declaration …))`) run apart, on the top levels
    of the tree only: kept alive through the whole walk, they cost the big pass a tenth of a parse
    in bundled JavaScript."""
    refs = references if "@ref" in references else f"[{references}] @ref"
    fields = [_name_field(language, pattern) for _, pattern in definitions]
    numbered = [
        re.sub(r"@(name|def)\b", rf"@\g<1>{index}", pattern).replace(f" @name{index}", "")
        if fields[index] is not None
        else re.sub(r"@(name|def)\b", rf"@\g<1>{index}", pattern)
        for index, (_, pattern) in enumerate(definitions)
    ]
    root = f"({tree_sitter.Parser(language).parse(b'').root_node.type} "
    file_level = [pattern for pattern in numbered if pattern.startswith(root)]
    return CompiledQuery(
        query=tree_sitter.Query(
            language, "\n".join([*(p for p in numbered if not p.startswith(root)), refs])
        ),
        file_level=tree_sitter.Query(language, "\n".join(file_level)) if file_level else None,
        kinds=[kind for kind, _ in definitions],
        names=[None if fields[index] is not None else f"name{index}" for index in range(len(numbered))],
        defining=[f"def{index}" for index in range(len(numbered))],
        name_fields=fields,
        pattern_of={f"def{index}": index for index in range(len(numbered))},
    )


_THREAD = threading.local()


def _cursors(
    key: str, compiled: CompiledQuery
) -> tuple[tree_sitter.QueryCursor, tree_sitter.QueryCursor | None]:
    """This thread's query cursors for a grammar (a cursor runs one query at a time; made once, it
    keeps the room its states grew to)."""
    cursors: dict[str, tuple[tree_sitter.QueryCursor, tree_sitter.QueryCursor | None]] | None
    cursors = getattr(_THREAD, "cursors", None)
    if cursors is None:
        cursors = _THREAD.cursors = {}
    found = cursors.get(key)
    if found is None:
        top = None
        if compiled.file_level is not None:
            top = tree_sitter.QueryCursor(compiled.file_level)
            top.set_max_start_depth(0)  # patterns that start at the root: no deeper start to look for
        found = cursors[key] = (tree_sitter.QueryCursor(compiled.query), top)
    return found


def capture(key: str, compiled: CompiledQuery, root: tree_sitter.Node) -> dict[str, list[tree_sitter.Node]]:
    """The nodes each capture name of grammar `key`'s query caught in the tree under `root`."""
    whole, top = _cursors(key, compiled)
    captures = whole.captures(root)
    if top is not None:
        captures.update(top.captures(root))
    return captures


def definition_nodes(
    captures: dict[str, list[tree_sitter.Node]], compiled: CompiledQuery
) -> dict[int, tuple[int, tree_sitter.Node, tree_sitter.Node]]:
    """The definitions' (pattern, name node, defining node) by their name's first byte, in the
    order of the file. When two patterns claim a name, the one listed first wins (the more
    specific)."""
    chosen: dict[int, tuple[int, tree_sitter.Node, tree_sitter.Node]] = {}
    for pattern in sorted(compiled.pattern_of[c] for c in captures if c in compiled.pattern_of):
        defs = captures[compiled.defining[pattern]]
        name_field = compiled.name_fields[pattern]
        if name_field is not None:
            field, node_type = name_field
            for def_node in defs:
                names = def_node.children_by_field_id(field)
                if len(names) > 1:  # `a, b int`: each name of the pattern's type is one match
                    names = [n for n in names if (n.is_named if node_type == "_" else n.type == node_type)]
                for name_node in names:
                    chosen.setdefault(name_node.start_byte, (pattern, name_node, def_node))
            continue
        for name_node, def_node in definition_pairs(captures[compiled.names[pattern]], defs):  # type: ignore[index]
            chosen.setdefault(name_node.start_byte, (pattern, name_node, def_node))
    return {start: chosen[start] for start in sorted(chosen)}  # `captures` lists come in no order
