"""The Quality page over the history database: every figure counted in SQL over the whole range
it names (the last `days` UTC days, today included; 14 by default), never over a capped list.

Per day: questions (every day of the range, a day with none included), answered, no answer in
the code, we failed (bot/web/coverage.py says which outcome is which), time to answer (p50/p95,
SQL window functions) and votes. Over the range: the same totals, percentiles, and the questions
not answered grouped by repo. "Time to answer" is `codebot_question_seconds`' (texts.TIME_TO_ANSWER).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    ColumnElement,
    Connection,
    Engine,
    case,
    cast,
    func,
    literal,
    or_,
    select,
    type_coerce,
)

from bot.web.coverage import ANSWERED, NO_ANSWER, OTHER, REFINED_STATUSES, WE_FAILED, coverage_of
from bot.web.data import DAY_SECONDS, day_of, last_days
from bot.web.plots import Plot, Series, line_plot
from worker.history import schema

DEFAULT_DAYS = 14
MAX_DAYS = 366
PERCENTILES = (50, 95)
q, v = schema.questions, schema.votes


@dataclass
class QualityDay:
    day: str
    questions: int = 0
    kinds: Counter[str] = field(default_factory=Counter)  # coverage class -> questions
    causes: Counter[str] = field(default_factory=Counter)  # why we failed -> questions
    up: int = 0
    down: int = 0
    p50: float | None = None
    p95: float | None = None

    @property
    def answered(self) -> int:
        return self.kinds[ANSWERED]

    @property
    def answer_rate(self) -> float | None:
        return self.kinds[ANSWERED] / self.questions * 100 if self.questions else None

    @property
    def helpful_rate(self) -> float | None:
        return self.up / (self.up + self.down) * 100 if self.up + self.down else None


@dataclass(frozen=True)
class RepoGap:
    repo: str
    no_answer: int
    failed: int
    other: int  # kinds this release does not know
    causes: list[tuple[str, int]]  # why we failed, most first
    outcomes: list[tuple[str, int]]  # outcome kinds, most first


@dataclass(frozen=True)
class QualityView:
    start: float
    end: float
    days: list[QualityDay]
    total: QualityDay  # the whole range
    gaps: list[RepoGap]

    @property
    def range_text(self) -> str:
        return f"{self.days[0].day} – {self.days[-1].day} UTC ({len(self.days)} days)"

    def share(self, kind: str) -> float:
        return self.total.kinds[kind] / self.total.questions * 100 if self.total.questions else 0.0


def days_wanted(params: Any) -> int:
    """`?days=N`: how many UTC days the page covers, today included (default 14, 1 to MAX_DAYS)."""
    try:
        return min(MAX_DAYS, max(1, int(params.get("days") or DEFAULT_DAYS)))
    except ValueError:
        return DEFAULT_DAYS


def has_questions(engine: Engine) -> bool:
    """Whether the history holds any question at all (an empty one is said to be empty)."""
    with engine.connect() as connection:
        return connection.execute(select(q.c.event_id).limit(1)).first() is not None


def quality_view(engine: Engine, count: int, now: float) -> QualityView:
    days = last_days(count, now)
    start = now - now % DAY_SECONDS - (count - 1) * DAY_SECONDS  # the first day's midnight, UTC
    end = start + count * DAY_SECONDS
    per_day = {day: QualityDay(day) for day in days}
    total = QualityDay("all")
    with engine.connect() as connection:
        day = _day_number(connection, q.c.at)
        for number, status, kind, crashed, n in connection.execute(
            _outcome_counts(connection, day, start, end)
        ):
            _add(per_day[day_of(number * DAY_SECONDS)], status, kind, crashed, n)
            _add(total, status, kind, crashed, n)
        for number, percentile, seconds in _percentiles(connection, day, start, end):
            setattr(per_day[day_of(number * DAY_SECONDS)], f"p{percentile}", seconds)
        for _, percentile, seconds in _percentiles(connection, None, start, end):
            setattr(total, f"p{percentile}", seconds)
        for number, vote, n in _votes(connection, start, end):
            for shown in (per_day[day_of(number * DAY_SECONDS)], total):
                shown.up += n if vote == "up" else 0
                shown.down += n if vote == "down" else 0
        gaps = _gaps(connection, start, end)
    return QualityView(start, end, [per_day[d] for d in days], total, gaps)


def _day_number(connection: Connection, at: Any) -> ColumnElement[Any]:
    """The UTC day of an epoch time, as days since 1970 (floor; PostgreSQL's cast would round)."""
    if connection.dialect.name == "postgresql":
        return cast(func.floor(at / DAY_SECONDS), BigInteger)
    return cast(at / DAY_SECONDS, BigInteger)  # SQLite's CAST truncates: a floor for times after 1970


def _failure_kind(connection: Connection) -> ColumnElement[Any]:
    """`facts`' failure_kind (facts is JSON in a text column: PostgreSQL must be told so), read
    only for the statuses it can move (bot/web/coverage.py): parsing every answer's facts would
    be most of the page's time."""
    document = (
        cast(q.c.facts, JSON) if connection.dialect.name == "postgresql" else type_coerce(q.c.facts, JSON)
    )
    return case((q.c.status.in_(REFINED_STATUSES), document["failure_kind"].as_string()), else_=None)


def _in_range(start: float, end: float) -> list[ColumnElement[bool]]:
    return [q.c.at >= start, q.c.at < end]


def _outcome_counts(connection: Connection, day: ColumnElement[Any], start: float, end: float) -> Any:
    kind = _failure_kind(connection)
    crashed = case((q.c.reason == "crash", 1), else_=0)
    return (
        select(day, q.c.status, kind, crashed, func.count())
        .where(*_in_range(start, end))
        .group_by(day, q.c.status, kind, crashed)
    )


def _add(shown: QualityDay, status: str, kind: str | None, crashed: int, n: int) -> None:
    coverage = coverage_of(status, kind, bool(crashed))
    shown.questions += n
    shown.kinds[coverage.kind] += n
    if coverage.cause:
        shown.causes[coverage.cause] += n


def _percentiles(
    connection: Connection, day: ColumnElement[Any] | None, start: float, end: float
) -> list[tuple[int, int, float]]:
    """(day, percentile, seconds): the nearest-rank p50 and p95 of every finished question's
    time to answer, per day (or over the range when `day` is None), by window functions."""
    groups = [day] if day is not None else []
    ranked = (
        select(
            (day if day is not None else literal(0)).label("day"),
            q.c.seconds,
            func.row_number().over(partition_by=groups, order_by=(q.c.seconds, q.c.event_id)).label("rank"),
            func.count().over(partition_by=groups).label("n"),
        )
        .where(*_in_range(start, end))
        .subquery()
    )
    wanted = {p: (ranked.c.n * p + 99) // 100 for p in PERCENTILES}  # ceil(n * p / 100), in integers
    rows = connection.execute(
        select(ranked.c.day, ranked.c.rank, ranked.c.n, ranked.c.seconds).where(
            or_(*(ranked.c.rank == rank for rank in wanted.values()))
        )
    )
    found = []
    for number, rank, n, seconds in rows:
        for p in PERCENTILES:
            if rank == -(-n * p // 100):
                found.append((int(number) if day is not None else 0, p, float(seconds)))
    return found


def _votes(connection: Connection, start: float, end: float) -> list[tuple[int, str, int]]:
    """(day, vote, count): each voter's last vote on a question, by the day it was cast (a vote
    changed is counted once, as it stands)."""
    latest = select(
        v.c.at,
        v.c.vote,
        func.row_number().over(partition_by=(v.c.question_id, v.c.user), order_by=v.c.at.desc()).label("nth"),
    ).subquery()
    day = _day_number(connection, latest.c.at)
    query = (
        select(day, latest.c.vote, func.count())
        .where(latest.c.nth == 1, latest.c.at >= start, latest.c.at < end)
        .group_by(day, latest.c.vote)
    )
    return [(int(number), str(vote), int(n)) for number, vote, n in connection.execute(query)]


def _gaps(connection: Connection, start: float, end: float) -> list[RepoGap]:
    """The questions not answered, by repo (a question about two repos counts for each)."""
    kind = _failure_kind(connection)
    crashed = case((q.c.reason == "crash", 1), else_=0)
    query = (
        select(q.c.repos, q.c.status, kind, crashed, func.count())
        .where(*_in_range(start, end), q.c.status != "answered")
        .group_by(q.c.repos, q.c.status, kind, crashed)
    )
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    causes: dict[str, Counter[str]] = defaultdict(Counter)
    outcomes: dict[str, Counter[str]] = defaultdict(Counter)
    for repos, status, failure_kind, crash, n in connection.execute(query):
        coverage = coverage_of(status, failure_kind, bool(crash))
        for repo in _repos(repos):
            counts[repo][coverage.kind] += n
            outcomes[repo][status] += n
            if coverage.cause:
                causes[repo][coverage.cause] += n
    gaps = [
        RepoGap(
            repo,
            counts[repo][NO_ANSWER],
            counts[repo][WE_FAILED],
            counts[repo][OTHER],
            causes[repo].most_common(),
            outcomes[repo].most_common(),
        )
        for repo in counts
    ]
    return sorted(gaps, key=lambda gap: (-gap.no_answer, -gap.failed, gap.repo))


def _repos(text: str) -> list[str]:
    try:
        value = json.loads(text)
    except ValueError:
        value = []
    return [str(repo) for repo in value] if isinstance(value, list) and value else ["(no repo)"]


def quality_plots(view: QualityView) -> list[Plot]:
    """Questions per day (a day with none is a 0, drawn), the rates, and the time to answer."""
    days = [d.day for d in view.days]
    questions = line_plot(
        "questions",
        "Questions per day",
        days,
        [Series("questions", [float(d.questions) for d in view.days], "s1")],
    )
    rates = line_plot(
        "rates",
        "👍 helpful rate and answer rate",
        days,
        [
            Series("👍 helpful rate", [d.helpful_rate for d in view.days], "s1"),
            Series("answer rate", [d.answer_rate for d in view.days], "s2"),
        ],
        unit="%",
        top=100,
    )
    times = line_plot(
        "time-to-answer",
        "Time to answer",
        days,
        [Series("p50", [d.p50 for d in view.days], "s1"), Series("p95", [d.p95 for d in view.days], "s3")],
        unit=" s",
    )
    return [questions, rates, times]
