"""Reading names out of tree-sitter nodes: a definition's own name and qualifier, a container's
name, a node's text. Shared by every grammar (worker/repos/symbol_grammars.py)."""

from __future__ import annotations

import operator
from collections.abc import Collection, Iterator
from typing import AnyStr

import tree_sitter

_SEPARATORS = ("::", "\\")
_FIRST_TWO = operator.itemgetter(0, 1)


def text_of(node: tree_sitter.Node | None, source: bytes) -> str:
    """A node's text, sliced from the source (Node.text is several times slower)."""
    return (
        source[node.start_byte : node.end_byte].decode("utf-8", errors="replace") if node is not None else ""
    )


def _dotted(text: str) -> str:
    for separator in _SEPARATORS:
        text = text.replace(separator, ".")
    return text.strip(".")


def _type_name(node: tree_sitter.Node, source: bytes) -> str:
    """`Order` of `Order`, `Order<T>`, `&mut Order`, `pkg::Order`: its first type identifier."""
    names = [n for n in walk(node) if n.type == "type_identifier"]
    return text_of(names[0] if names else node, source)


def container_name(node: tree_sitter.Node, source: bytes) -> str | None:
    if node.type == "impl_item":  # Rust: `impl Trait for Order` holds Order's methods
        target = node.child_by_field_name("type")
        return _type_name(target, source) if target is not None else None
    name = node.child_by_field_name("name")
    if name is None:
        return None
    if name.type == "user_type":  # Swift: `extension Order`
        return _type_name(name, source)
    return _dotted(text_of(name, source)) or None


def walk(node: tree_sitter.Node) -> list[tree_sitter.Node]:
    found = [node]
    for child in node.children:
        found.extend(walk(child))
    return found


def name_of(name_node: tree_sitter.Node, source: bytes) -> tuple[str, str | None]:
    """A definition's own name, and the qualifier written into it (`Cart::total`, `Shop.Orders`)."""
    if name_node.type != "qualified_identifier":  # the common case, in short
        text = text_of(name_node, source).lstrip(":")
        if "." not in text and "::" not in text and "\\" not in text:
            return text, None
    node = name_node
    while node.type == "qualified_identifier" and node.child_by_field_name("name") is not None:
        node = node.child_by_field_name("name")  # type: ignore[assignment]
    text = text_of(node, source).lstrip(":")
    qualifier = None
    if node is not name_node:
        qualifier = _dotted(source[name_node.start_byte : node.start_byte].decode("utf-8", errors="replace"))
    elif "." in (dotted := _dotted(text)):
        qualifier, _, text = dotted.rpartition(".")
    if node is not name_node and qualifier:
        qualifier = qualifier.rsplit(".", 1)[-1]  # `ns::Cart::total` belongs to Cart
    return text, qualifier or None


def definition_pairs(
    names: list[tree_sitter.Node], defs: list[tree_sitter.Node]
) -> Iterator[tuple[tree_sitter.Node, tree_sitter.Node]]:
    """Each name a pattern captured with the node it defines: the innermost of `defs` (that
    pattern's captures) around it. One sweep over both in the order of the file; Node.parent
    would walk down from the root for every step up."""
    if len(defs) == 1:
        yield from ((name, defs[0]) for name in names)
        return
    ranked = sorted(((d.start_byte, -d.end_byte, d) for d in defs), key=_FIRST_TWO)
    around: list[tuple[int, tree_sitter.Node]] = []  # (end, node): the defs open here, innermost last
    at = 0
    for start, end, name in sorted(((n.start_byte, n.end_byte, n) for n in names), key=_FIRST_TWO):
        while at < len(ranked) and ranked[at][0] <= start:
            _, minus_end, node = ranked[at]
            while around and around[-1][0] < -minus_end:
                around.pop()
            around.append((-minus_end, node))
            at += 1
        while around and around[-1][0] < end:
            around.pop()
        if around and start < end:
            yield name, around[-1][1]
        elif (enclosing := _enclosing(name, defs)) is not None:  # an empty (missing) name: ask the tree
            yield name, enclosing


def _enclosing(node: tree_sitter.Node, defs: list[tree_sitter.Node]) -> tree_sitter.Node | None:
    found: tree_sitter.Node | None = node
    while found is not None and found not in defs:
        found = found.parent
    return found


def identifier_rows(
    nodes: list[tree_sitter.Node], source: bytes, skip: Collection[int]
) -> dict[str, list[int]]:
    """The rows each name is used on: -1, then the 0-based rows in the order of `nodes` (a row may
    repeat; the -1 is what worker/repos/ref_lines.py `pack_rows` starts its deltas from), from the
    identifier nodes but those starting at a byte in `skip` (the definitions' own names). The hot
    loop of indexing, one pass, grouping by name as it goes (the store keeps one row per name and
    file): names sliced from the source (Node.text is several times slower); an ASCII file (most
    are) decoded once and sliced as text, any other's names decoded once each."""
    if source.isascii():
        return _uses(nodes, source.decode("ascii"), skip)
    decoded: dict[str, list[int]] = {}
    for raw, rows in _uses(nodes, source, skip).items():  # two invalid names may decode alike
        decoded.setdefault(raw.decode("utf-8", errors="replace"), [-1]).extend(rows[1:])
    return decoded


def _uses(nodes: list[tree_sitter.Node], whole: AnyStr, skip: Collection[int]) -> dict[AnyStr, list[int]]:
    uses: dict[AnyStr, list[int]] = {}
    for node in nodes:
        if (start := node.start_byte) not in skip:
            name = whole[start : node.end_byte]
            rows = uses.get(name)
            if rows is None:
                uses[name] = [-1, node.start_point[0]]
            else:
                rows.append(node.start_point[0])
    return uses
