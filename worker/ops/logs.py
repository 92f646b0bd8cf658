"""Logging for every process: plain text for a terminal, or one JSON object per line.

Question logs carry job id, platform, channel, repos, tool calls, tokens and duration as
fields; never message text or code unless `log_question_text` is set.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

from config.settings import Settings
from worker.ops.inert import inert, inert_line

# Fields a record may carry via `extra=` that the JSON formatter writes out.
FIELDS = (
    "job_id",
    "ref",
    "platform",
    "channel",
    "user",
    "repos",
    "status",
    "hops",
    "tool_calls",
    "tools",
    "prompt_tokens",
    "completion_tokens",
    "verified",
    "unverified",
    "seconds",
    "reason",
    "question",
)


_context: ContextVar[dict[str, object]] = ContextVar("codebot_log_context", default={})  # noqa: B039


@contextlib.contextmanager
def log_context(**fields: object) -> Iterator[None]:
    """Fields (e.g. the question's job id and reference) for what is logged deep inside, where
    the question is not known (a tool that crashed): read with `context_fields()`."""
    token = _context.set({**_context.get(), **fields})
    try:
        yield
    finally:
        _context.reset(token)


def context_fields() -> dict[str, object]:
    """The fields of the innermost `log_context`, to pass as a record's `extra=`."""
    return dict(_context.get())


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in FIELDS:
            if name in record.__dict__:
                entry[name] = record.__dict__[name]
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        # One record, one line: a newline or an escape in what was logged is shown escaped.
        record.message = inert_line(record.message)
        return super().formatMessage(record)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = " ".join(
            f"{name}={inert_line(str(record.__dict__[name]))}" for name in FIELDS if name in record.__dict__
        )
        return inert(f"{line} {extras}" if extras else line)  # the traceback keeps its newlines


def configure_logging(settings: Settings, level: int = logging.INFO, log_file: Path | None = None) -> None:
    """Log lines to stderr, or to `log_file` (appended) for a command whose screen is its answer."""
    handler: logging.Handler
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpx2", "openai", "discord", "slack_bolt", "slack_sdk", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
