"""What the agent writes into the conversation itself: the model's tool-call turn as it is kept,
and, when the model cannot answer, the summary of the code that was found."""

from __future__ import annotations

from typing import Any

from worker.agent.model import ModelTurn
from worker.tools.context import ToolContext


def assistant_message(turn: ModelTurn) -> dict[str, Any]:
    """The model's tool-call turn as we keep it; ModelClient sends its content in the form the
    endpoint accepts ("" by default, never null unless nothing else is accepted)."""
    return {
        "role": "assistant",
        "content": turn.content,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments or "{}"}}
            for c in turn.tool_calls
        ],
    }


def evidence_summary(ctx: ToolContext) -> str:
    """When the model cannot answer: say which code was found, with checkable citations."""
    files = sorted(ctx.shown.files())
    if not files:
        return "The model wrote no answer, and no file was read far enough to cite."
    lines = ["Here is the code I was looking at; it may hold the answer:"]
    for repo, path in files[:10]:
        seen = sorted(ctx.shown.lines[(repo, path)])
        start = seen[0]
        end = start
        while end + 1 in ctx.shown.lines[(repo, path)] and end - start < 40:
            end += 1
        lines.append(f"- [{repo}:{path}#L{start}-L{end}]" if end > start else f"- [{repo}:{path}#L{start}]")
    return "\n".join(lines)
