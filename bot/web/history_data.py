"""The Questions page read from the history database (worker/history/) instead of Redis's
capped list: any time range, pages of PAGE_ROWS, lookup by the reference an asker sees, and
the range and row count the page covers, counted in SQL over the whole range.

Used when the history database is there (`open_history`): CODEBOT_HISTORY_URL is set, or the
default SQLite file exists on this machine. Otherwise the page reads Redis as before.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from redis import Redis
from sqlalchemy import Engine, Select, and_, func, select
from sqlalchemy.exc import SQLAlchemyError

from bot.web.data import Filters, QuestionRow, question_row
from config.settings import Settings
from worker.history import schema
from worker.history.export import parse_since
from worker.history.store import history_url, open_engine

PAGE_ROWS = 50
DEFAULT_RANGE = "7d"
q = schema.questions


def open_history(settings: Settings) -> Engine | None:
    """The history's engine, or None when there is no database to read (nothing recorded here)."""
    if settings.history_url is None and not (settings.data_dir / "history.sqlite3").exists():
        return None
    return open_engine(history_url(settings))


@dataclass(frozen=True)
class Range:
    """What the page was asked for: `since`/`until` as typed (7d, a date…), a reference, a page."""

    since: str = DEFAULT_RANGE
    until: str = ""
    ref: str = ""
    page: int = 1

    @classmethod
    def of(cls, params: Any) -> Range:
        try:
            page = max(1, int(params.get("page") or 1))
        except ValueError:
            page = 1
        since = str(params.get("since") or DEFAULT_RANGE).strip()
        return cls(since, str(params.get("until") or "").strip(), str(params.get("ref") or "").strip(), page)

    def bounds(self, now: float) -> tuple[float, float]:
        """[start, end) in epoch seconds; a range that does not parse is the default one."""
        try:
            start = parse_since(self.since, now)
        except ValueError:
            start = parse_since(DEFAULT_RANGE, now)
        try:
            end = parse_since(self.until, now) if self.until else now + 1
        except ValueError:
            end = now + 1
        return start, end


@dataclass(frozen=True)
class HistoryPage:
    rows: list[QuestionRow]
    total: int  # rows in the whole range with these filters, counted in SQL
    start: float
    end: float
    page: int
    pages: int
    outcomes: list[str]
    repos: list[str]
    channels: list[str]

    @property
    def first_shown(self) -> int:
        return (self.page - 1) * PAGE_ROWS + 1 if self.rows else 0

    @property
    def last_shown(self) -> int:
        return (self.page - 1) * PAGE_ROWS + len(self.rows)

    @property
    def range_text(self) -> str:
        shown = "%Y-%m-%d %H:%M"
        return f"{time.strftime(shown, time.gmtime(self.start))} – {time.strftime(shown, time.gmtime(self.end))} UTC"


def _where(query: Select[Any], filters: Filters, wanted: Range, start: float, end: float) -> Select[Any]:
    conditions = [q.c.at >= start, q.c.at < end]
    if wanted.ref:
        conditions.append(q.c.ref == wanted.ref.lower())
    if filters.outcome:
        conditions.append(q.c.status == filters.outcome)
    if filters.repo:
        # repos is a JSON list: the name with its quotes, LIKE's own characters escaped
        escaped = json.dumps(filters.repo).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        conditions.append(q.c.repos.like(f"%{escaped}%", escape="\\"))
    if filters.channel:
        platform, _, channel = filters.channel.partition(":")
        conditions += [q.c.platform == platform, q.c.channel == channel]
    return query.where(and_(*conditions))


def history_questions_page(
    engine: Engine, redis: Redis, filters: Filters, wanted: Range, show_text: bool, now: float
) -> HistoryPage:
    start, end = wanted.bounds(now)
    with engine.connect() as connection:
        total = connection.execute(
            _where(select(func.count()).select_from(q), filters, wanted, start, end)
        ).scalar_one()
        pages = max(1, -(-total // PAGE_ROWS))
        page = min(wanted.page, pages)
        listing = _where(select(q.c.facts, q.c.at), filters, wanted, start, end)
        listing = (
            listing.order_by(q.c.at.desc(), q.c.event_id.desc())
            .offset((page - 1) * PAGE_ROWS)
            .limit(PAGE_ROWS)
        )
        records = [_record(facts, at) for facts, at in connection.execute(listing)]
        in_range = [q.c.at >= start, q.c.at < end]
        outcomes = connection.execute(select(q.c.status).where(*in_range).distinct()).scalars().all()
        channels = connection.execute(select(q.c.platform, q.c.channel).where(*in_range).distinct()).all()
        repo_lists = connection.execute(select(q.c.repos).where(*in_range).distinct()).scalars().all()
    repos = {str(repo) for text in repo_lists for repo in _json_list(text)}
    return HistoryPage(
        rows=[question_row(redis, record, show_text) for record in records],
        total=int(total),
        start=start,
        end=end,
        page=page,
        pages=pages,
        outcomes=sorted(outcomes),
        repos=sorted(repos),
        channels=sorted(f"{platform}:{channel}" for platform, channel in channels),
    )


def history_question(engine: Engine, question_id: str) -> dict[str, Any] | None:
    """A question's latest recorded run, with its trace, or None (also when the database fails)."""
    try:
        with engine.connect() as connection:
            found = connection.execute(
                select(q.c.event_id, q.c.facts, q.c.at)
                .where(q.c.question_id == question_id)
                .order_by(q.c.at.desc())
                .limit(1)
            ).first()
            if found is None:
                return None
            calls = schema.tool_calls
            trace = connection.execute(
                select(calls.c.line).where(calls.c.event_id == found.event_id).order_by(calls.c.seq)
            ).scalars()
            return _record(found.facts, found.at) | {"trace": list(trace)}
    except SQLAlchemyError:
        return None


def _record(facts: str, at: float) -> dict[str, Any]:
    try:
        loaded = json.loads(facts)
    except ValueError:
        loaded = {}
    record: dict[str, Any] = loaded if isinstance(loaded, dict) else {}
    return record | {"at": record.get("at") or at}


def _json_list(text: str) -> list[Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return value if isinstance(value, list) else []
