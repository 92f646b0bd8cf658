"""An explicit name→tool registry that makes OpenAI tool schemas from typed functions.

A tool is a function `f(ctx: ToolContext, <params>) -> ToolResult` whose docstring is the
description the model sees (Google style: a summary, then `Args:` lines naming parameters). A
parameter named after a Python keyword plus `_` (`from_`) is the keyword (`from`) in the schema.
Calling a tool never raises: bad JSON, an unknown tool or parameter, a wrong type or a
ToolError all come back as `Error: …` text the model can act on. Every result leaves without
NUL or any other C0/C1 control character (`inert`).
"""

from __future__ import annotations

import inspect
import json
import keyword
import logging
import re
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from worker.ops.logs import context_fields
from worker.tools.context import ToolContext, ToolError

log = logging.getLogger("codebot.tools")


@dataclass
class ToolResult:
    text: str  # what the model sees: redacted, capped, with notices of what was cut
    data: dict[str, Any] = field(default_factory=dict)  # the same facts as JSON, for `codebot tool`


@dataclass
class ToolOutcome:
    name: str
    arguments: dict[str, Any]
    ok: bool
    text: str  # "Error: …" when not ok
    data: dict[str, Any] = field(default_factory=dict)


ToolFunction = Callable[..., ToolResult]

_JSON_TYPES: dict[type, str] = {str: "string", int: "integer", bool: "boolean", float: "number"}


def _split_docstring(doc: str) -> tuple[str, dict[str, str]]:
    doc = inspect.cleandoc(doc)
    summary, _, args_block = doc.partition("\nArgs:\n")
    params: dict[str, str] = {}
    current = None
    for line in args_block.splitlines():
        match = re.match(r"^\s{2,}(\w+):\s*(.*)$", line)
        if match:
            current = match.group(1)
            params[current] = match.group(2).strip()
        elif current and line.strip():
            params[current] += " " + line.strip()
    # A paragraph's line breaks are the docstring's wrapping, not the model's: one line each.
    paragraphs = (" ".join(line.strip() for line in p.splitlines()) for p in re.split(r"\n\s*\n", summary))
    return "\n".join(p for p in paragraphs if p), params


def _base_type(annotation: Any) -> tuple[type, bool]:
    """(the JSON-able type, whether None is allowed)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0], True
    return annotation, False


@dataclass(frozen=True)
class Tool:
    name: str
    function: ToolFunction
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments
    types: dict[str, tuple[type, bool]]

    @classmethod
    def from_function(cls, function: ToolFunction) -> Tool:
        summary, param_docs = _split_docstring(function.__doc__ or "")
        hints = typing.get_type_hints(function)
        properties: dict[str, Any] = {}
        required: list[str] = []
        kinds: dict[str, tuple[type, bool]] = {}
        for index, (python_name, param) in enumerate(inspect.signature(function).parameters.items()):
            if index == 0:
                continue  # the ToolContext
            name = json_name(python_name)
            base, nullable = _base_type(hints[python_name])
            kinds[name] = (base, nullable)
            prop: dict[str, Any] = {"type": _JSON_TYPES[base]}
            if python_name in param_docs:
                prop["description"] = param_docs[python_name]
            if param.default is inspect.Parameter.empty:
                required.append(name)
            elif param.default is not None:
                prop["default"] = param.default
            properties[name] = prop
        schema = {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }
        return cls(function.__name__, function, summary, schema, kinds)

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def bind(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check and coerce the model's arguments, or raise ToolError saying what is wrong."""
        unknown = set(arguments) - set(self.types)
        if unknown:
            raise ToolError(
                f"unknown parameter {sorted(unknown)[0]!r} for {self.name}; "
                f"its parameters are: {', '.join(self.types) or 'none'}"
            )
        missing = [p for p in self.parameters["required"] if arguments.get(p) is None]
        if missing:
            raise ToolError(f"missing required parameter {missing[0]!r} for {self.name}")
        bound: dict[str, Any] = {}
        for name, value in arguments.items():
            base, nullable = self.types[name]
            if value is None:
                if not nullable and name in self.parameters["required"]:
                    raise ToolError(f"parameter {name!r} of {self.name} must not be null")
                continue  # falls back to the default
            bound[python_name(name)] = _coerce(name, value, base)
        return bound


def json_name(name: str) -> str:
    """A parameter's name in the schema: `from_` (a Python keyword) is `from`."""
    return name[:-1] if name.endswith("_") and keyword.iskeyword(name[:-1]) else name


def python_name(name: str) -> str:
    return f"{name}_" if keyword.iskeyword(name) else name


def _coerce(name: str, value: Any, base: type) -> Any:
    if base is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in {"true", "false"}:
            return value.lower() == "true"
    elif base is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and re.fullmatch(r"-?\d{1,18}", value.strip()):
            return int(value)
    elif base is str:
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
    raise ToolError(f"parameter {name!r} must be {_JSON_TYPES[base]}, got {json.dumps(value)[:60]}")


class ToolRegistry:
    def __init__(self, functions: Iterable[ToolFunction]) -> None:
        self.tools: dict[str, Tool] = {}
        for function in functions:
            tool = Tool.from_function(function)
            self.tools[tool.name] = tool
        # Built once: every model request lists the same schemas, and the same objects let the
        # request's size be counted without encoding them again (worker/agent/context.py).
        # Nothing changes them after this.
        self._schemas = [tool.schema() for tool in self.tools.values()]

    def names(self) -> list[str]:
        return list(self.tools)

    def schemas(self) -> list[dict[str, Any]]:
        return list(self._schemas)

    def call(self, ctx: ToolContext, name: str, arguments: str | dict[str, Any] | None) -> ToolOutcome:
        parsed: dict[str, Any] = {}
        try:
            parsed = _parse_arguments(arguments)
            tool = self.tools.get(name)
            if tool is None:
                raise ToolError(f"unknown tool {name!r}; the tools are: {', '.join(self.tools)}")
            bound = tool.bind(parsed)
            result = tool.function(ctx, **bound)
        except ToolError as exc:
            text = ctx.redact(f"Error: {exc}")
            limit = ctx.settings.tool_output_max_chars  # errors echo arguments, which may be huge
            if len(text) > limit:
                text = text[: limit - 40] + " …[error message cut]"
            return ToolOutcome(name, parsed, False, inert(text))
        except Exception as exc:  # a bug of ours: logged as one, with its traceback; the question goes on
            log.exception("tool %s crashed", name, extra=context_fields())
            return ToolOutcome(
                name, parsed, False, f"Error: the tool failed unexpectedly ({type(exc).__name__})"
            )
        return ToolOutcome(name, parsed, True, inert(result.text), _inert_data(result.data))


# NUL and the other C0 and C1 controls (tab and newline kept): repo content, commit metadata and
# file names can hold them, and none may reach a model, a chat message, a log or a terminal
# (an ESC starts a terminal escape, a NUL hides the rest of a line from some readers).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


def inert(text: str) -> str:
    """`text` without NUL or any other C0/C1 control character but tab and newline. (A regex
    search first: almost every text has none, and str.translate maps each character through a
    dict, ~0.15 ms for a 200-line read.)"""
    return _CONTROLS.sub("", text) if _CONTROLS.search(text) else text


def _inert_data(value: Any) -> Any:
    if isinstance(value, str):
        return inert(value)
    if isinstance(value, list | tuple):
        return [_inert_data(item) for item in value]
    if isinstance(value, dict):
        return {key: _inert_data(item) for key, item in value.items()}
    return value


def _parse_arguments(arguments: str | dict[str, Any] | None) -> dict[str, Any]:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise ToolError(
            f"the arguments are not valid JSON ({exc.msg} at character {exc.pos}); send a JSON object"
        ) from None
    except RecursionError:
        raise ToolError("the arguments are nested too deeply; send a flat JSON object") from None
    if not isinstance(parsed, dict):
        raise ToolError('the arguments must be a JSON object, e.g. {"repo": "name"}')
    return parsed
