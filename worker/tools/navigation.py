"""find_definition and find_references: code navigation from the snapshot's symbol index.

The index (worker/repos/symbols.py) maps the snapshot's paths to symbols a real parser extracted
once per blob, so a call is a few indexed SQL lookups. Every line shown is read from the
(redacted) snapshot through the same path gate as read_file and recorded as shown, so the model
may cite it.
"""

from __future__ import annotations

import difflib
import json
import re
import sqlite3
from dataclasses import dataclass
from typing import Any

from worker.repos.snapshot import Snapshot
from worker.repos.symbol_grammars import GRAMMARS
from worker.repos.symbols import TEST_PATH, Definition, Reference, SymbolIndex, open_index
from worker.repos.visible import shown_name
from worker.tools.context import ToolContext, ToolError
from worker.tools.files import cached_lines
from worker.tools.paths import resolve_path
from worker.tools.redact import finish
from worker.tools.registry import ToolResult

_SYMBOL = re.compile(r"^[#$\w]+(?:\.[#$\w]+)*$")
SYMBOL_MAX_CHARS = 200
_NAMES = sorted({g.name for g in GRAMMARS.values()} - {"C/C++"}, key=str.lower)
LANGUAGES = ", ".join(_NAMES[:-1]) + " and " + _NAMES[-1]
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


def _index(ctx: ToolContext, snapshot: Snapshot) -> SymbolIndex:
    try:
        return open_index(snapshot.root, ctx.settings)
    except (OSError, sqlite3.Error, ToolError) as exc:
        raise ToolError(
            f"the code index of repo {snapshot.repo.name!r} is unavailable ({type(exc).__name__}); "
            "use search instead, e.g. pattern 'def NAME|class NAME|func NAME'"
        ) from None


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


def _not_found(ctx: ToolContext, snapshots: list[Snapshot], symbol: str, name: str) -> ToolError:
    candidates: set[str] = set()
    partial = False
    pending = 0
    skipped: list[str] = []
    for snapshot in snapshots:
        index = _index(ctx, snapshot)
        try:
            candidates.update(index.names_like(name))
            info = index.info()
            partial = partial or info.partial
            pending += info.pending
            skipped += [f"{shown_name(f.path)} ({f.reason})" for f in index.not_indexed(limit=3)]
        finally:
            index.close()
    near = difflib.get_close_matches(name, sorted(candidates), n=5, cutoff=0.6)
    near += sorted((c for c in candidates if name.lower() in c.lower() and c not in near), key=len)
    where = f"repo {snapshots[0].repo.name}" if len(snapshots) == 1 else f"{len(snapshots)} repos"
    hint = f" Did you mean: {', '.join(near[:6])}?" if near else ""
    extra = " (the index of a very large repo covers only its first files)" if partial else ""
    if pending:
        extra += f" (the index is still being built: {pending:,} files not parsed yet; search sees them)"
    if skipped:
        extra += f" (not indexed: {', '.join(skipped[:3])}{' and more' if len(skipped) > 3 else ''})"
    return ToolError(
        f"no definition of {symbol!r} in {where}{extra}.{hint} The index covers {LANGUAGES} code "
        "defined in the repo; for other languages, text, or names from libraries, use search "
        f"with a pattern like '\\b{name}\\b'"
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
    for snapshot in snapshots:
        index = _index(ctx, snapshot)
        try:
            definitions = index.definitions(name, container)
            if not definitions and container is not None:
                definitions = index.definitions(name)
                qualifier_ignored = qualifier_ignored or bool(definitions)
            if not definitions:
                definitions = index.definitions(name, nocase=True)
        finally:
            index.close()
        found += [_Found(snapshot, d) for d in definitions]
    if not found:
        raise _not_found(ctx, snapshots, symbol.strip(), name)
    found.sort(key=_rank)
    result = _render_definitions(ctx, symbol.strip(), found, container if qualifier_ignored else None)
    ctx.result_cache[key] = result
    return result


def _render_definitions(
    ctx: ToolContext, symbol: str, found: list[_Found], ignored: str | None
) -> ToolResult:
    settings = ctx.settings
    budget = settings.tool_output_max_chars - 800
    noun = "definition" if len(found) == 1 else "definitions"
    lines = [f"{len(found)} {noun} of {symbol!r}:"]
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
    for snapshot in snapshots:
        index = _index(ctx, snapshot)
        try:
            references, count = index.references(name, max(0, limit - len(found)))
            defined = index.definitions(name)
        finally:
            index.close()
        total += count
        found += [(snapshot, r) for r in references]
        definitions += [f"{snapshot.repo.name}:{d.path}:{d.line}" for d in defined]
    if not total and not definitions:
        raise _not_found(ctx, snapshots, symbol.strip(), name)
    result = _render_references(ctx, name, found, total, definitions)
    ctx.result_cache[key] = result
    return result


def _render_references(
    ctx: ToolContext,
    name: str,
    found: list[tuple[Snapshot, Reference]],
    total: int,
    definitions: list[str],
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
        return finish(ctx, text, {"symbol": name, "references": [], "total": 0})
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
    return finish(ctx, "\n".join([header, *body]), {"symbol": name, "references": records, "total": total})
