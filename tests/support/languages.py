"""A repo in every language code navigation covers, for its tests: small hand-written files
(tests/fixtures/languages/) beside the Python/JS/TS/Go shop of tests/support/polyglot.py.

Each `Case` names a class-like and a function-like definition, where it is (the line is found by
a snippet, so editing a fixture cannot silently move it), and a file of another name that uses
the function-like one (in the same language or in one of its family).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.support.polyglot import POLYGLOT

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "languages"


def language_files() -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = dict(POLYGLOT)
    for path in sorted(FIXTURES.rglob("*")):
        if path.is_file():
            files[path.relative_to(FIXTURES).as_posix().replace("web_", "web/src/")] = path.read_text()
    return files


@dataclass(frozen=True)
class Definition:
    symbol: str  # what the model asks for
    kind: str
    path: str
    snippet: str  # text on the definition's first line


@dataclass(frozen=True)
class Case:
    language: str
    type_like: Definition
    function_like: Definition
    used_in: str  # another file that uses the function-like name


CASES = [
    Case(
        "Python",
        Definition("Queue", "class", "payments/retry.py", "class Queue:"),
        Definition("retry", "function", "payments/retry.py", "def retry("),
        "payments/api.py",
    ),
    Case(
        "JavaScript",
        Definition("Store", "class", "web/src/store.js", "export class Store"),
        Definition("formatPrice", "function", "web/src/format.js", "export function formatPrice"),
        "web/src/cart.ts",  # TypeScript calling JavaScript: one family
    ),
    Case(
        "TypeScript",
        Definition("Square", "class", "web/src/shapes.ts", "export class Square"),
        Definition("total", "function", "web/src/main.ts", "export function total"),
        "web/src/cart.ts",
    ),
    Case(
        "Go",
        Definition("Backoff", "struct", "worker/retry/backoff.go", "type Backoff struct"),
        Definition("retry.Do", "function", "worker/retry/backoff.go", "func Do("),
        "worker/main.go",
    ),
    Case(
        "Java",
        Definition("Order", "class", "java/com/shop/orders/Order.java", "public class Order"),
        Definition("Order.total", "method", "java/com/shop/orders/Order.java", "public int total()"),
        "kotlin/Checkout.kt",  # Kotlin calling Java: one family
    ),
    Case(
        "Kotlin",
        Definition("Gateway", "interface", "kotlin/Checkout.kt", "interface Gateway"),
        Definition("formatCents", "function", "kotlin/Checkout.kt", "fun formatCents"),
        "kotlin/Main.kt",
    ),
    Case(
        "C#",
        Definition("Order", "class", "csharp/Orders.cs", "public class Order"),
        Definition("Order.Total", "method", "csharp/Orders.cs", "public decimal Total()"),
        "csharp/Billing.cs",
    ),
    Case(
        "C",
        Definition("order", "struct", "c/orders.h", "struct order {"),
        Definition(
            "order_total", "function", "c/orders.c", "cents_t order_total(const struct order *order)\n{"
        ),
        "cpp/cart.cpp",  # C++ calling C: one family
    ),
    Case(
        "C++",
        Definition("shop.Cart", "class", "cpp/cart.cpp", "class Cart : public Base"),
        Definition("Cart.total", "method", "cpp/cart.cpp", "cents_t Cart::total() const {"),
        "cpp/main.cpp",
    ),
    Case(
        "Rust",
        Definition("Priced", "trait", "rust/src/lib.rs", "pub trait Priced"),
        Definition("checkout", "function", "rust/src/lib.rs", "pub fn checkout"),
        "rust/src/main.rs",
    ),
    Case(
        "Ruby",
        Definition("Shop.Order", "class", "ruby/order.rb", "class Order < Base"),
        Definition("checkout", "function", "ruby/order.rb", "def checkout(order)"),
        "ruby/app.rb",
    ),
    Case(
        "PHP",
        Definition("Priced", "interface", "php/Order.php", "interface Priced"),
        Definition("checkout", "function", "php/Order.php", "function checkout("),
        "php/index.php",
    ),
    Case(
        "Swift",
        Definition("Line", "struct", "swift/Order.swift", "struct Line {"),
        Definition("checkout", "function", "swift/Order.swift", "func checkout("),
        "swift/main.swift",
    ),
    Case(
        "Scala",
        Definition("Priced", "trait", "scala/Order.scala", "trait Priced {"),
        Definition("checkout", "function", "scala/Order.scala", "def checkout("),
        "scala/Main.scala",
    ),
    Case(
        "Shell",
        Definition("build_image", "function", "bash/deploy.sh", "build_image() {"),
        Definition("push_image", "function", "bash/deploy.sh", "function push_image"),
        "bash/release.sh",
    ),
]


def line_of(files: dict[str, str | bytes], path: str, snippet: str) -> int:
    text = files[path]
    assert isinstance(text, str) and text.count(snippet) == 1, f"{snippet!r} is not once in {path}"
    return text[: text.index(snippet)].count("\n") + 1
