"""find_definition and find_references: code navigation from the snapshot's symbol index.

The index (worker/repos/symbols.py) maps the snapshot's paths to symbols a real parser extracted
once per blob, so a call is a few indexed SQL lookups. Every line shown is read from the
(redacted) snapshot through the same path gate as read_file and recorded as shown, so the model
may cite it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from worker.repos.snapshot import Snapshot
from worker.repos.symbols import TEST_PATH, Definition, Reference
from worker.repos.visible import shown_name
from worker.tools.context import ToolContext, ToolError
from worker.tools.files import cached_lines
from worker.tools.navigation_lookup import Lookup, OutOfTime, not_found, start
from worker.tools.paths import resolve_path
from worker.tools.redact import finish
from worker.tools.registry import ToolResult

_SYMBOL = re.compile(r"^[#$\w]+(?:\.[#$\w]+)*$")
SYMBOL_MAX_CHARS = 200
# Definitions people ask about first: real code before tests, types and functions before fields.
_KIND_ORDER = {"class": 0, "interface": 0, "struct": 0, "type": 0, "enum": 0, "function": 1, "method": 1}


@dataclass(frozen=True)
class _Found:
    snapshot: Snapshot
    definition: Definition


def _parse_symbol(symbol: str) -> tuple[str | None, str]:
    """("Queue.enqueue") -> ("Queue", "enqueue"); ("retry") -> (None, "retry")."""
    symbol = symbol.strip().strip("`")
    if symbol.endswith("()"):
        symbol = symbol[:-2]
    if not symbol or len(symbol) > SYMBOL_MAX_CHARS or not _SYMBOL.match(symbol):
        raise ToolError(
            f"{symbol[:80]!r} is not a symbol name; give an identifier like 'retry_job', 'Queue' or "
            "'Queue.enqueue' (no spaces, regexes or file paths) — use search for text patterns"
        )
    container, _, name = symbol.rpartition(".")
    return container.rsplit(".", 1)[-1] or None, name


def _snapshots(ctx: ToolContext, repo: str | None) -> list[Snapshot]:
    if repo:
        return [ctx.snapshot(repo)]
    if not ctx.snapshots:
        raise ToolError("no repo is in scope for this question, so there is no code to look in")
    return [ctx.snapshots[name] for name in sorted(ctx.snapshots)]


def _lines(ctx: ToolContext, snapshot: Snapshot, path: str) -> list[str] | None:
    """The file's redacted lines, through the same gate as read_file; None if not readable now."""
    try:
        absolute, relative = resolve_path(snapshot, path, ctx.settings)
        if not absolute.is_file() or absolute.stat().st_size > ctx.settings.read_cache_max_file_bytes:
            return None
        return cached_lines(ctx, snapshot.repo.name, relative, absolute)
    except (ToolError, OSError):
        return None  # e.g. a file that matches a secret pattern configured after indexing


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" …[line cut: {len(text):,} chars]"


def _rank(found: _Found) -> tuple[int, int, bool, str, int]:
    """Code before tests, types and functions before the rest, and a bare name's top-level
    definitions before members of the same name (a member is asked for as `Type.member`)."""
    d = found.definition
    return (
        bool(TEST_PATH.search(d.path)),
        _KIND_ORDER.get(d.kind, 2),
        d.container is not None,
        d.path,
        d.line,
    )


def _cached(ctx: ToolContext, key: str) -> ToolResult | None:
    cached = ctx.result_cache.get(key)
    if isinstance(cached, ToolResult):
        return ToolResult("(You already made this exact call; same result.)\n" + cached.text, cached.data)
    return None


def find_definition(ctx: ToolContext, symbol: str, repo: str | None = None) -> ToolResult:
    """Find where a function, class, method, type or constant is defined, from a real parser's index.

    One call gives each definition's file, line range, kind, container and first lines (citable).
    Most languages (repo_overview says which); for others or free text, use search. Give the bare
    name ("retry_job") or qualify it with its class, namespace or Go package ("Queue.enqueue", "retry.Do").

    Args:
        symbol: the identifier, e.g. "build_registry", "ToolContext" or "Mirrors.sync"
        repo: look only in this repo; omit for every repo in scope
    """
    container, name = _parse_symbol(symbol)
    snapshots = _snapshots(ctx, repo)
    key = json.dumps(["find_definition", symbol.strip(), [s.repo.name for s in snapshots]])
    if (cached := _cached(ctx, key)) is not None:
        return cached
    found: list[_Found] = []
    qualifier_ignored = False
    lookup = None
    try:
        lookup = start(ctx, snapshots, name)
        for snapshot in lookup.to_open():
            with lookup.index(ctx, snapshot) as index:
                definitions = index.definitions(name, container)
                if not definitions and container is not None:
                    definitions = index.definitions(name)
                    qualifier_ignored = qualifier_ignored or bool(definitions)
                if not definitions:
                    definitions = index.definitions(name, nocase=True)
            found += [_Found(snapshot, d) for d in definitions]
        if not found:
            raise not_found(ctx, lookup, symbol.strip(), name)
    except OutOfTime:
        if lookup is None or not found:
            return _out_of_time(ctx, "definition", symbol.strip(), lookup, snapshots)
    finally:
        if lookup is not None:
            lookup.close()
    found.sort(key=_rank)
    ignored = container if qualifier_ignored else None
    result = _render_definitions(
        ctx, symbol.strip(), found, ignored, lookup.ran_out() if lookup.timed_out else None
    )
    if not lookup.timed_out:
        ctx.result_cache[key] = result
    return result


def _out_of_time(
    ctx: ToolContext,
    what: str,
    symbol: str,
    lookup: Lookup | None,
    snapshots: list[Snapshot],
) -> ToolResult:
    """Nothing found before the time limit: never "not found", since the rest was not looked in."""
    ran_out = (
        lookup.ran_out()
        if lookup is not None
        else f"ran out of time after 0 of {len(snapshots)} repos (the time was up before it began)"
    )
    text = (
        f"Looked for a {what} of {symbol!r} but {ran_out}: none found so far, so one may exist there. "
        "Pass repo= to look in one repo, or use search with a pattern like "
        f"'\\b{symbol.rpartition('.')[2]}\\b'."
    )
    return finish(ctx, text, {"symbol": symbol, "timed_out": True, "total_is_lower_bound": True})


def _render_definitions(
    ctx: ToolContext, symbol: str, found: list[_Found], ignored: str | None, ran_out: str | None
) -> ToolResult:
    settings = ctx.settings
    budget = settings.tool_output_max_chars - 800
    noun = "definition" if len(found) == 1 else "definitions"
    lines = [f"{len(found)} {noun} of {symbol!r}:"]
    if ran_out:
        lines.insert(0, f"[{ran_out}; pass repo= to look in one]")
    if ignored:
        lines[0] += f" (nothing is defined in {ignored!r}; these are every {symbol.rpartition('.')[2]!r})"
    records: list[dict[str, Any]] = []
    used = len(lines[0])
    for item in found[: settings.definition_max_results]:
        d, snapshot = item.definition, item.snapshot
        repo = snapshot.repo.name
        text = _lines(ctx, snapshot, d.path)
        if text is None or d.line > len(text):
            continue
        last = min(d.end_line, d.line + settings.definition_preview_lines - 1, len(text))
        width = len(str(last))
        cite = f"#L{d.line}-L{last}" if last > d.line else f"#L{d.line}"
        span = f"lines {d.line}-{d.end_line}" if d.end_line > d.line else f"line {d.line}"
        owner = f"{d.container}." if d.container else ""
        block = ["", f"[{repo}:{shown_name(d.path)}{cite}]  {d.kind} {owner}{d.name} ({d.language}), {span}"]
        block += [
            f"{n:>{width}}│ {_cut(text[n - 1], settings.read_max_line_chars)}"
            for n in range(d.line, last + 1)
        ]
        if d.end_line > last:
            block.append(
                f"  … {d.end_line - last} more line(s): read_file path={d.path!r} "
                f"start_line={last + 1} end_line={d.end_line}"
            )
        cost = sum(len(row) + 1 for row in block)
        if records and used + cost > budget:
            break
        used += cost
        lines += block
        ctx.shown.add(repo, d.path, range(d.line, last + 1))
        records.append({"repo": repo, **{k: v for k, v in vars(d).items()}})
    if len(records) < len(found):
        lines.append(
            f"\n[showing {len(records)} of {len(found)}; pass repo= or qualify the name, e.g. 'Class.method']"
        )
    return finish(ctx, "\n".join(lines), {"symbol": symbol, "definitions": records, "total": len(found)})


def find_references(ctx: ToolContext, symbol: str, repo: str | None = None) -> ToolResult:
    """Find where a function, class, method, type or constant is used (imports and calls included), from a real parser's index.

    Unlike search, it skips comments, strings, look-alike words and the definitions themselves.
    For names defined in the repo, matched by name ("Queue.enqueue" finds every use of "enqueue").
    Shows up to 50 lines grouped by file and how many more exist.

    Args:
        symbol: the identifier, e.g. "build_registry" or "ToolContext"
        repo: look only in this repo; omit for every repo in scope
    """
    _container, name = _parse_symbol(symbol)
    snapshots = _snapshots(ctx, repo)
    key = json.dumps(["find_references", name, [s.repo.name for s in snapshots]])
    if (cached := _cached(ctx, key)) is not None:
        return cached
    limit = ctx.settings.references_max_results
    found: list[tuple[Snapshot, Reference]] = []
    total = 0
    definitions: list[str] = []
    lookup = None
    try:
        lookup = start(ctx, snapshots, name)
        for snapshot in lookup.to_open():  # a repo that defines no such name has no use of it
            with lookup.index(ctx, snapshot) as index:
                references, count = index.references(name, max(0, limit - len(found)))
                defined = index.definitions(name)
            total += count
            found += [(snapshot, r) for r in references]
            definitions += [f"{snapshot.repo.name}:{d.path}:{d.line}" for d in defined]
        if not total and not definitions:
            raise not_found(ctx, lookup, symbol.strip(), name)
    except OutOfTime:
        if lookup is None or (not total and not definitions):
            return _out_of_time(ctx, "use", symbol.strip(), lookup, snapshots)
    finally:
        if lookup is not None:
            lookup.close()
    ran_out = lookup.ran_out() if lookup.timed_out else None
    result = _render_references(ctx, name, found, total, definitions, ran_out)
    if not lookup.timed_out:
        ctx.result_cache[key] = result
    return result


def _render_references(
    ctx: ToolContext,
    name: str,
    found: list[tuple[Snapshot, Reference]],
    total: int,
    definitions: list[str],
    ran_out: str | None,
) -> ToolResult:
    settings = ctx.settings
    defined = ", ".join(definitions[:3]) + (
        f" and {len(definitions) - 3} more" if len(definitions) > 3 else ""
    )
    if not total:
        text = (
            f"{name!r} is defined at {defined} but used nowhere else in the indexed code "
            "(comments and strings do not count; dynamic uses such as getattr or reflection cannot be seen)."
        )
        if ran_out:
            text = f"[{ran_out}; pass repo= to look in one]\n{text}"
        return finish(ctx, text, {"symbol": name, "references": [], "total": 0, "timed_out": bool(ran_out)})
    body: list[str] = []
    records: list[dict[str, Any]] = []
    budget = settings.tool_output_max_chars - 800
    used = 0
    current: tuple[str, str] | None = None
    for snapshot, ref in found:
        repo = snapshot.repo.name
        file_lines = _lines(ctx, snapshot, ref.path)
        if file_lines is None or ref.line > len(file_lines):
            continue
        rows = [] if (repo, ref.path) == current else [f"{repo}:{shown_name(ref.path)}"]
        rows.append(f"  {ref.line:>5}│ {_cut(file_lines[ref.line - 1], settings.search_max_line_chars)}")
        cost = sum(len(row) + 1 for row in rows)
        if records and used + cost > budget:
            break
        body += rows
        used += cost
        current = (repo, ref.path)
        ctx.shown.add(repo, ref.path, [ref.line])
        records.append({"repo": repo, "path": ref.path, "line": ref.line})
    shown = len(records)
    header = f"{total} line(s) using {name!r} (matched by name; definitions at {defined or 'none indexed'} left out)"
    if shown < total:
        header = (
            f"Showing {shown} of {total} lines using {name!r} (matched by name; definitions at "
            f"{defined or 'none indexed'} left out) — pass repo= to narrow, or search with a glob:"
        )
    if ran_out:
        header = f"[{ran_out}; pass repo= to look in one]\n{header}"
    data = {"symbol": name, "references": records, "total": total, "timed_out": bool(ran_out)}
    return finish(ctx, "\n".join([header, *body]), data)
