"""The last step of every tool result: redaction (worker/repos/redaction.py) and a size cap.

Snapshots hold text redacted at rest, so this pass finds nothing in file content; it is the
defence in depth for everything else a tool echoes (arguments in messages, paths).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from worker.repos.redaction import PRIVATE_KEY_MARKER, Redaction, Redactor, get_redactor, plugin_rules
from worker.tools.context import ToolContext
from worker.tools.registry import ToolResult

__all__ = ["PRIVATE_KEY_MARKER", "Redaction", "Redactor", "finish", "get_redactor", "plugin_rules"]


def _redact_data(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list | tuple):
        return [_redact_data(item, redact) for item in value]
    if isinstance(value, dict):
        return {key: _redact_data(item, redact) for key, item in value.items()}
    return value


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
    return ToolResult(text=text, data=_redact_data(data or {}, ctx.redact))
