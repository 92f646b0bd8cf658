"""Running a grammar's patterns over a parse tree: one query for the definitions and the
references, read with `QueryCursor.captures`, and each captured name paired with the
definition it names. Used by worker/repos/symbol_grammars.py `parse_source`."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import tree_sitter

from worker.repos.symbol_tree import definition_pairs


@dataclass(frozen=True)
class CompiledQuery:
    query: tree_sitter.Query  # the definition patterns but the file-level ones, and the references
    file_level: tree_sitter.Query | None  # the patterns anchored at the file's root node
    kinds: list[str]  # of the definition patterns, in their order
    pattern_of: dict[str, int]  # `name{i}` -> i
    defining: list[str]  # i -> `def{i}`


def compile_query(
    language: tree_sitter.Language, definitions: list[tuple[str, str]], references: str
) -> CompiledQuery:
    """One pass over the whole tree: the definition patterns and the references (a third faster
    than two passes). Pattern i captures `name{i}` and `def{i}`, so that `QueryCursor.captures`
    (one list per capture name, no dict and no Python object per match: a sixth faster) still says
    which pattern found a name. The patterns anchored at the root node
    (`(program (lexical_declaration …))`) run apart, on the top levels of the tree only: kept
    alive through the whole walk, they cost the big pass a tenth of a parse in bundled JavaScript."""
    refs = references if "@ref" in references else f"[{references}] @ref"
    numbered = [
        re.sub(r"@(name|def)\b", rf"@\g<1>{index}", pattern) for index, (_, pattern) in enumerate(definitions)
    ]
    root = f"({tree_sitter.Parser(language).parse(b'').root_node.type} "
    file_level = [pattern for pattern in numbered if pattern.startswith(root)]
    return CompiledQuery(
        query=tree_sitter.Query(
            language, "\n".join([*(p for p in numbered if not p.startswith(root)), refs])
        ),
        file_level=tree_sitter.Query(language, "\n".join(file_level)) if file_level else None,
        kinds=[kind for kind, _ in definitions],
        pattern_of={f"name{index}": index for index in range(len(numbered))},
        defining=[f"def{index}" for index in range(len(numbered))],
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
    found = sorted((compiled.pattern_of[c], c) for c in captures if c in compiled.pattern_of)
    chosen: dict[int, tuple[int, tree_sitter.Node, tree_sitter.Node]] = {}
    for pattern, name in found:
        for name_node, def_node in definition_pairs(captures[name], captures[compiled.defining[pattern]]):
            chosen.setdefault(name_node.start_byte, (pattern, name_node, def_node))
    return dict(sorted(chosen.items()))  # `captures` lists come in no particular order
