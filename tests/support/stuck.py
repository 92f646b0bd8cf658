"""Tools that hang as a hung mount makes them: blocked in the kernel on a FIFO no writer opens."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from worker.tools import TOOL_FUNCTIONS
from worker.tools.registry import ToolRegistry


def blocked_on(fifo: Path) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Wraps a tool so that it first reads `fifo` (never returning while no writer comes)."""

    def wrap(tool: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            with open(fifo, "rb") as handle:
                handle.read()
            return tool(*args, **kwargs)

        return run

    return wrap


def wrapped(**wrappers: Callable[[Callable[..., Any]], Callable[..., Any]]) -> ToolRegistry:
    """The real tools, some wrapped (same name, schema and docstring)."""
    return ToolRegistry(
        functools.wraps(f)(wrappers[f.__name__](f)) if f.__name__ in wrappers else f for f in TOOL_FUNCTIONS
    )
