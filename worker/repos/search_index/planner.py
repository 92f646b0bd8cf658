"""A search pattern (ripgrep's Rust regex syntax) planned into trigram look-ups.

The plan is a boolean query over trigrams that every line the regex matches must satisfy: files
whose content lacks it cannot match, and the search leaves them unread. Every file the plan
keeps is still searched by ripgrep itself, so the plan only ever needs to be *sound* (never drop
a file that can match), never exact.

The parser here is our own and deliberately small: it understands literals, escaped
punctuation, `.`, character classes (as "some character"), the Perl classes, anchors, groups,
the `i` flag, alternation and repetition — and gives up (`None`: no narrowing, every file is
searched) on anything else: the `x` flag, `\\<` `\\>` `\\b{…}`, nested or set-operation
classes, unknown escapes. Python's `re` parser is not used because it reads some Rust syntax as
literals (`[[:alpha:]]`, `\\<`), which would drop files that match.

Only printable ASCII characters form trigrams (the index folds case, and ASCII folds the same
in SQLite and in ripgrep). Under case-insensitive matching `k` and `s` are left out too: Unicode
folding makes them match the Kelvin sign and the long s, which the index does not fold to them.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

MAX_EXACT = 16  # strings kept in an exact set before it becomes a query
MAX_EXACT_CHARS = 48  # longest string kept in an exact set

_PUNCTUATION = set("\\.+*?()|[]{}^$#&-~ /!\"%',:;=@_`")  # escapes that mean the character itself
_CLASS_ESCAPES = set("dDwWsSpP")  # a class of characters (\p{..} is read past below)
_ANCHOR_ESCAPES = set("bBAz")  # zero-width
_UNSAFE_CASELESS = set("kKsS")
_KNOWN_FLAGS = set("imsuUR-")  # x (whitespace and comments) changes what is literal: refused


class Unplannable(ValueError):
    """Syntax this planner does not understand: the search then reads every file."""


# A query is ("all",), ("gram", "abc"), ("and", q...), ("or", q...)
Query = tuple[object, ...]
ALL: Query = ("all",)


def _and(parts: list[Query]) -> Query:
    kept = [p for p in parts if p != ALL]
    flat: list[Query] = []
    for part in kept:
        flat.extend(part[1:] if part[0] == "and" else [part])  # type: ignore[arg-type]
    unique = list(dict.fromkeys(flat))
    return ALL if not unique else unique[0] if len(unique) == 1 else ("and", *unique)


def _or(parts: list[Query]) -> Query:
    if not parts or any(p == ALL for p in parts):
        return ALL
    unique = list(dict.fromkeys(parts))
    return unique[0] if len(unique) == 1 else ("or", *unique)


@dataclass(frozen=True)
class _Info:
    """What a piece of the regex matches: an exact set of strings (None: too many to list, with a
    character that forms no trigram written as NUL) and a query every match satisfies."""

    exact: frozenset[str] | None
    query: Query = ALL

    def as_query(self) -> Query:
        if self.exact is None:
            return self.query
        return _or([_string_query(s) for s in self.exact])


def _string_query(text: str) -> Query:
    grams = [text[i : i + 3] for i in range(len(text) - 2)]
    return _and([("gram", g.lower()) for g in grams if "\0" not in g])


_ANY = _Info(frozenset({"\0"}))  # one character that forms no trigram
_EMPTY = _Info(frozenset({""}))


def _exact_or_query(strings: set[str]) -> _Info:
    if len(strings) <= MAX_EXACT and all(len(s) <= MAX_EXACT_CHARS for s in strings):
        return _Info(frozenset(strings))
    return _Info(None, _or([_string_query(s) for s in strings]))


def _concat(parts: list[_Info]) -> _Info:
    """Runs of exact parts are multiplied out (so their trigrams span the parts); every match
    of the whole holds a match of each run and of each other part, so their queries are ANDed."""
    done: list[Query] = []
    run = _EMPTY
    for part in parts:
        if part.exact is not None and run.exact is not None and len(run.exact) * len(part.exact) <= MAX_EXACT:
            run = _exact_or_query({a + b for a, b in product(run.exact, part.exact)})
            if run.exact is None:  # grown too long to keep exact: its query stands, a new run starts
                done.append(run.query)
                run = _EMPTY
            continue
        done.append(run.as_query())
        run = part if part.exact is not None else _EMPTY
        if part.exact is None:
            done.append(part.query)
    if not done:
        return run
    return _Info(None, _and([*done, run.as_query()]))


def _alternate(parts: list[_Info]) -> _Info:
    if all(p.exact is not None for p in parts):
        return _exact_or_query({s for p in parts for s in p.exact or ()})
    return _Info(None, _or([p.as_query() for p in parts]))


class _Parser:
    def __init__(self, pattern: str, caseless: bool) -> None:
        self.text = pattern
        self.at = 0
        # any case-insensitivity anywhere makes k and s unsafe everywhere (simple and sound)
        self.caseless = caseless or ("(?" in pattern and "i" in pattern)

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def take(self) -> str:
        char = self.peek()
        if not char:
            raise Unplannable("unexpected end")
        self.at += 1
        return char

    def alternation(self) -> _Info:
        branches = [self.sequence()]
        while self.peek() == "|":
            self.at += 1
            branches.append(self.sequence())
        return _alternate(branches)

    def sequence(self) -> _Info:
        parts: list[_Info] = []
        while self.peek() and self.peek() not in "|)":
            atom = self.atom()
            parts.append(self.repeat(atom))
        return _concat(parts)

    def repeat(self, atom: _Info) -> _Info:
        char = self.peek()
        if char in ("*", "?", "+"):
            self.at += 1
            least = 1 if char == "+" else 0
        elif char == "{":
            least = self.counted()
        else:
            return atom
        if self.peek() == "?":  # lazy
            self.at += 1
        if self.peek() in ("*", "?", "+", "{"):
            raise Unplannable("repetition of a repetition")
        if least == 0:
            if char == "?" and atom.exact is not None:
                return _exact_or_query({"", *atom.exact})
            return _EMPTY if atom.exact is not None else _Info(None)
        return _Info(None, atom.as_query())  # at least once: its query holds

    def counted(self) -> int:
        end = self.text.find("}", self.at)
        body = self.text[self.at + 1 : end] if end > 0 else ""
        low, _, high = body.partition(",")
        if not low.strip().isdigit() or (high.strip() and not high.strip().isdigit()):
            raise Unplannable("a brace that is not a counted repetition")
        self.at = end + 1
        return int(low)

    def atom(self) -> _Info:
        char = self.take()
        if char == "(":
            return self.group()
        if char == "[":
            self.skip_class()
            return _ANY
        if char == "\\":
            return self.escape()
        if char in ".":
            return _ANY
        if char in "^$":
            return _EMPTY
        if char in "*+?{}" or char == ")":
            raise Unplannable("a repetition operator with nothing to repeat")
        return self.literal(char)

    def literal(self, char: str) -> _Info:
        if not " " <= char <= "~" or (self.caseless and char in _UNSAFE_CASELESS):
            return _ANY
        return _Info(frozenset({char}))

    def escape(self) -> _Info:
        char = self.take()
        if char in _PUNCTUATION:
            return self.literal(char)
        if char in _CLASS_ESCAPES:
            if char in "pP" and self.peek() == "{":
                end = self.text.find("}", self.at)
                if end < 0:
                    raise Unplannable("unclosed \\p{")
                self.at = end + 1
            elif char in "pP":
                self.take()
            return _ANY
        if char in _ANCHOR_ESCAPES and self.peek() != "{":
            return _EMPTY
        raise Unplannable(f"escape \\{char}")

    def skip_class(self) -> None:
        """Past a bracketed class; nested classes and set operations are refused."""
        if self.peek() == "^":
            self.at += 1
        if self.peek() == "]":
            self.at += 1
        while True:
            char = self.take()
            if char == "]":
                return
            if char == "[":
                raise Unplannable("a nested class")
            if char == "\\":
                self.take()
            elif char in "&-~" and self.peek() == char:
                raise Unplannable("a class set operation")

    def group(self) -> _Info:
        if self.peek() == "?":
            self.at += 1
            if self.text.startswith("P<", self.at) or self.peek() == "<":
                end = self.text.find(">", self.at)
                if end < 0:
                    raise Unplannable("unclosed group name")
                self.at = end + 1
            else:
                flags = ""
                while self.peek() and self.peek() not in ":)":
                    flags += self.take()
                if not set(flags) <= _KNOWN_FLAGS or self.peek() == "":
                    raise Unplannable(f"flags {flags!r}")
                if self.take() == ")":
                    return _EMPTY
        inner = self.alternation()
        if self.take() != ")":
            raise Unplannable("unclosed group")
        return inner


def plan(pattern: str, ignore_case: bool) -> Query | None:
    """The trigram query every matching line satisfies; None when the pattern cannot be narrowed
    (the search then reads every file)."""
    parser = _Parser(pattern, ignore_case)
    try:
        info = parser.alternation()
        if parser.peek():
            raise Unplannable("unbalanced )")
    except Unplannable:
        return None
    query = info.as_query()
    return None if query == ALL else query


def fts_expression(query: Query) -> str:
    """The query in SQLite FTS5 syntax (each trigram a quoted string)."""
    kind = query[0]
    if kind == "gram":
        return '"' + str(query[1]).replace('"', '""') + '"'
    parts = [fts_expression(part) for part in query[1:]]  # type: ignore[arg-type]
    return "(" + f" {str(kind).upper()} ".join(parts) + ")"
