"""Reading names out of tree-sitter nodes: a definition's own name and qualifier, a container's
name, a node's text. Shared by every grammar (worker/repos/symbol_grammars.py)."""

from __future__ import annotations

import tree_sitter

_SEPARATORS = ("::", "\\")


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
