"""The last step of every tool result: redaction (worker/repos/secrets/redaction.py) and a size cap.

Snapshots hold text redacted at rest, so this pass finds nothing in file content; it is the
defence in depth for everything else a tool echoes (arguments in messages, paths).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from worker.repos.secrets.redaction import PRIVATE_KEY_MARKER, Redaction, Redactor, get_redactor, plugin_rules
from worker.tools.context import ToolContext
from worker.tools.registry import ToolResult

__all__ = ["PRIVATE_KEY_MARKER", "Redaction", "Redactor", "finish", "get_redactor", "plugin_rules"]


def _strings(value: Any, found: list[str]) -> None:
    if isinstance(value, str):
        found.append(value)
    elif isinstance(value, list | tuple):
        for item in value:
            _strings(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, found)


def _rebuild(value: Any, redacted: Iterator[str]) -> Any:
    if isinstance(value, str):
        return next(redacted)
    if isinstance(value, list | tuple):
        return [_rebuild(item, redacted) for item in value]
    if isinstance(value, dict):
        return {key: _rebuild(item, redacted) for key, item in value.items()}
    return value


def _redact_data(value: Any, redact: Callable[[str], str]) -> Any:
    """Every string in `value` redacted. In one pass over them all, one per line run: redaction
    keeps the number of lines, so each string's lines are found again (a span across two strings
    only redacts more). A call per string would cost more than many a tool's own work."""
    strings: list[str] = []
    _strings(value, strings)
    if not strings:
        return value
    lines = redact("\n".join(strings)).split("\n")
    if len(lines) != sum(s.count("\n") + 1 for s in strings):
        return _rebuild(value, iter([redact(s) for s in strings]))  # never expected: redact each alone
    pieces = []
    at = 0
    for string in strings:
        count = string.count("\n") + 1
        pieces.append("\n".join(lines[at : at + count]))
        at += count
    return _rebuild(value, iter(pieces))


def finish(ctx: ToolContext, text: str, data: dict[str, Any] | None = None) -> ToolResult:
    """Every tool's last step: redact the text and the data, and cap the text with a notice."""
    text = ctx.redact(text)
    limit = ctx.settings.tool_output_max_chars
    if len(text) > limit:
        # Cut at a line end so no half line (or half a redaction marker) is shown.
        keep = text[: max(0, limit - 120)]
        if "\n" in keep:
            keep = keep[: keep.rindex("\n")]
        cut = len(text) - len(keep)
        text = (
            f"{keep}\n[output cut: {cut:,} more characters not shown — ask for less, e.g. a narrower range]"
        )
    if not ctx.keep_data:  # nobody reads it: none is made, so none can leak
        return ToolResult(text=text, data={})
    return ToolResult(text=text, data=_redact_data(data or {}, ctx.redact))
