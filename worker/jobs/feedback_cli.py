"""`codebot feedback list` and `codebot feedback export`: what users thought of the answers."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from redis import Redis
from rich.console import Console
from rich.table import Table
from rich.text import Text

from config.errors import ConfigError
from worker.jobs.admin import short_duration
from worker.jobs.feedback import SHOWN_QUESTION_CHARS, export_rows, recent_votes
from worker.ops.inert import inert, json_without_controls

VOTE_MARKS = {"up": "👍", "down": "👎"}


def run_list(redis: Redis, limit: int, out: Console) -> int:
    if limit < 1:
        raise ConfigError("--limit must be at least 1")
    rows = recent_votes(redis, limit)
    if not rows:
        out.print("no feedback yet")
        return 0
    table = Table(title=f"codebot feedback: the latest {len(rows)} vote(s)")
    for column in ("when", "vote", "ref", "platform", "channel", "user", "question", "reason"):
        table.add_column(column)
    now = time.time()
    # User text and ids as Text (never read as Rich markup), without control characters (never
    # a terminal escape).
    for vote, record in rows:
        question = record.question if record else ""
        shown = (
            question if len(question) <= SHOWN_QUESTION_CHARS else question[: SHOWN_QUESTION_CHARS - 1] + "…"
        )
        table.add_row(
            short_duration(now - vote.at) + " ago",
            VOTE_MARKS[vote.vote],
            Text(inert(record.ref) if record else "?"),
            Text(inert(vote.platform)),
            Text(inert(record.channel) if record else "?"),
            Text(inert(vote.user)),
            Text(inert(shown) or ("(not kept)" if record else "(expired)")),
            Text(inert(vote.reason)),
        )
    out.print(table)
    return 0


def run_export(redis: Redis, output: str, out: Console) -> int:
    # Control characters escaped (JSON does C0 itself; C1 and bidi here): `-` may be a terminal.
    lines = [json_without_controls(json.dumps(row, ensure_ascii=False)) + "\n" for row in export_rows(redis)]
    if output == "-":
        sys.stdout.writelines(lines)
        return 0
    try:
        Path(output).write_text("".join(lines), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{output}: cannot write the export ({exc.strerror})") from None
    flagged = sum('"flagged": true' in line for line in lines)
    out.print(f"wrote {len(lines)} question(s) to {output} ({flagged} flagged 👎)", markup=False)
    return 0
