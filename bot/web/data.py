"""What the console shows, read from Redis: questions, quality per day, repos, the system.

Read-only: nothing here writes to Redis. Every text that came from a user, a repo, a model or
a platform is passed to the templates as it is (Jinja2 autoescapes it there), never as markup.
A question's outcome is read tolerantly (`outcome_of`): a kind this release does not know is
shown as it is.
"""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from redis import Redis

from bot.web import texts
from worker.jobs import feedback
from worker.jobs.question import reference_id
from worker.jobs.question_log import recent_questions

DAY_SECONDS = 86400
ANSWERED = "answered"


def outcome_of(record: dict[str, Any]) -> str:
    """The question's outcome kind: `outcome` (or `kind`) when the job recorded one, else its status."""
    for key in ("outcome", "kind", "status"):
        value = record.get(key)
        if isinstance(value, str) and value:
            return value
    return "unknown"


def answer_seconds(record: dict[str, Any]) -> float:
    """The question's time to answer, as `codebot_question_seconds` measures it: from a worker
    taking it to its final reply posted or stored for the outbox (texts.TIME_TO_ANSWER); the
    wait in the queue is not in it."""
    return float(record.get("seconds") or 0)


def day_of(epoch: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(epoch))


def last_days(count: int, now: float) -> list[str]:
    return [day_of(now - (count - 1 - i) * DAY_SECONDS) for i in range(count)]


def _part(value: object) -> str:
    return quote(str(value), safe="")


def thread_url(record: dict[str, Any]) -> str | None:
    """A link to where the answer was posted, from the platform's ids (None: no web link)."""
    platform, channel = record.get("platform"), record.get("channel") or ""
    thread, message = record.get("thread") or "", record.get("message") or ""
    if platform == "slack" and record.get("team") and channel:
        base = f"https://app.slack.com/client/{_part(record['team'])}/{_part(channel)}"
        return f"{base}/thread/{_part(channel)}-{_part(thread)}" if thread else base
    if platform == "discord" and channel:
        guild = _part(record["guild"]) if record.get("guild") else "@me"  # @me: a DM
        if thread:
            return f"https://discord.com/channels/{guild}/{_part(thread)}"
        suffix = f"/{_part(message)}" if message else ""
        return f"https://discord.com/channels/{guild}/{_part(channel)}{suffix}"
    return None


@dataclass(frozen=True)
class QuestionRow:
    id: str
    ref: str
    at: float
    platform: str
    channel: str
    repos: list[str]
    outcome: str
    seconds: float
    tools: list[tuple[str, int]]
    up: int
    down: int
    url: str | None
    text: str  # empty unless the viewer may see questions' texts
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def when(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.at))


def question_row(redis: Redis, record: dict[str, Any], show_text: bool) -> QuestionRow:
    question_id = str(record.get("id", ""))
    votes = feedback.votes_of(redis, question_id) if question_id else []
    raw_tools = record.get("tools")
    tools: dict[str, Any] = raw_tools if isinstance(raw_tools, dict) else {}
    return QuestionRow(
        id=question_id,
        ref=str(record.get("ref") or reference_id(question_id)),
        at=float(record.get("at") or 0),
        platform=str(record.get("platform", "")),
        channel=str(record.get("channel", "")),
        repos=[str(r) for r in record.get("repos", [])],
        outcome=outcome_of(record),
        seconds=answer_seconds(record),
        tools=sorted(((str(k), int(v)) for k, v in tools.items()), key=lambda t: -t[1]),
        up=sum(v.vote == "up" for v in votes),
        down=sum(v.vote == "down" for v in votes),
        url=thread_url(record),
        text=str(record.get("question", "")) if show_text else "",
        record=record,
    )


# One line of a question's trace, as the agent writes it (worker/agent/loop.py):
# `NAME ARGUMENTS -> ok|error` or `NAME -> skipped (why)`. The last ` -> ` decides (greedy):
# arguments are model output and may hold one too.
TRACE_LINE = re.compile(r"(?P<name>\S+)(?: .*)? -> (?P<outcome>ok|error|skipped\b.*)", re.S)
TRACE_OUTCOMES = {"ok": texts.TRACE_OK, "error": texts.TRACE_ERROR, "skipped": texts.TRACE_CUT_OFF}


@dataclass(frozen=True)
class TraceFacts:
    """A trace without its arguments (which carry the question's words): each call's tool and
    outcome, and the counts."""

    steps: list[tuple[str, str]]
    counts: str


def trace_facts(lines: list[Any], known_tools: set[str]) -> TraceFacts:
    """A tool name the registry does not know is model output too: shown as "unknown"."""
    steps = []
    for line in lines:
        match = TRACE_LINE.fullmatch(str(line))
        name = match["name"] if match else ""
        outcome = TRACE_OUTCOMES[match["outcome"].split(" ")[0]] if match else texts.TRACE_ERROR
        steps.append((name if name in known_tools else texts.UNKNOWN_TOOL, outcome))
    tally = Counter(outcome for _, outcome in steps)
    counts = texts.trace_counts(tally[texts.TRACE_OK], tally[texts.TRACE_ERROR], tally[texts.TRACE_CUT_OFF])
    return TraceFacts(steps, counts)


@dataclass(frozen=True)
class Filters:
    outcome: str = ""
    repo: str = ""
    channel: str = ""
    ref: str = ""  # the reference an asker was given (System's links look one up)

    def keep(self, record: dict[str, Any]) -> bool:
        return (
            (not self.outcome or outcome_of(record) == self.outcome)
            and (not self.repo or self.repo in record.get("repos", []))
            and (not self.channel or channel_key(record) == self.channel)
            and (not self.ref or reference_of(record) == self.ref.lower())
        )


def reference_of(record: dict[str, Any]) -> str:
    return str(record.get("ref") or reference_id(str(record.get("id", ""))))


def channel_key(record: dict[str, Any]) -> str:
    return f"{record.get('platform', '')}:{record.get('channel', '')}"


@dataclass(frozen=True)
class QuestionsPage:
    rows: list[QuestionRow]
    total: int
    outcomes: list[str]
    repos: list[str]
    channels: list[str]


def questions_page(redis: Redis, filters: Filters, show_text: bool, limit: int = 200) -> QuestionsPage:
    records = recent_questions(redis)
    chosen = [r for r in records if filters.keep(r)]
    return QuestionsPage(
        rows=[question_row(redis, r, show_text) for r in chosen[:limit]],
        total=len(chosen),
        outcomes=sorted({outcome_of(r) for r in records}),
        repos=sorted({str(repo) for r in records for repo in r.get("repos", [])}),
        channels=sorted({channel_key(r) for r in records}),
    )


def capped_span(redis: Redis) -> tuple[int, float]:
    """How many questions Redis's capped list holds, and when the oldest of them ended."""
    records = recent_questions(redis)
    return len(records), min((float(r.get("at") or 0) for r in records), default=0.0)


def find_question(redis: Redis, question_id: str) -> dict[str, Any] | None:
    return next((r for r in recent_questions(redis) if r.get("id") == question_id), None)


# --- quality ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Day:
    day: str
    questions: int = 0
    answered: int = 0
    up: int = 0
    down: int = 0
    seconds: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Gap:
    repo: str
    count: int
    outcomes: list[tuple[str, int]]
    rows: list[QuestionRow]


def daily_quality(redis: Redis, days: list[str]) -> list[Day]:
    """Questions, answers, times to answer (of every question, whatever its outcome) and votes
    per UTC day (votes by the day they were cast)."""
    found = {day: Day(day) for day in days}
    for record in recent_questions(redis):
        day = found.get(day_of(float(record.get("at") or 0)))
        if day is None:
            continue
        answered = outcome_of(record) == ANSWERED
        found[day.day] = Day(
            day.day,
            day.questions + 1,
            day.answered + answered,
            day.up,
            day.down,
            [*day.seconds, answer_seconds(record)],  # every outcome's, as codebot_question_seconds
        )
    since = time.time() - len(days) * DAY_SECONDS
    for question_id in feedback.recent_question_ids(redis, since=since):
        for vote in feedback.votes_of(redis, question_id):
            day = found.get(day_of(vote.at))
            if day is not None:
                up, down = day.up + (vote.vote == "up"), day.down + (vote.vote == "down")
                found[day.day] = Day(day.day, day.questions, day.answered, up, down, day.seconds)
    return [found[day] for day in days]


def coverage_gaps(redis: Redis, show_text: bool, per_repo: int = 10) -> list[Gap]:
    """Questions that got no answer, grouped by repo (the most such questions first)."""
    by_repo: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in recent_questions(redis):
        if outcome_of(record) != ANSWERED:
            for repo in record.get("repos") or ["(no repo)"]:
                by_repo[str(repo)].append(record)
    gaps = [
        Gap(
            repo,
            len(records),
            Counter(outcome_of(r) for r in records).most_common(),
            [question_row(redis, r, show_text) for r in records[:per_repo]],
        )
        for repo, records in by_repo.items()
    ]
    return sorted(gaps, key=lambda gap: (-gap.count, gap.repo))


@dataclass(frozen=True)
class DownVote:
    at: float
    ref: str
    question_id: str
    reason: str
    repos: list[str]
    text: str

    @property
    def when(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M", time.gmtime(self.at))


def down_votes(redis: Redis, show_text: bool, limit: int = 50) -> list[DownVote]:
    rows = []
    for vote, answer in feedback.recent_votes(redis, limit=limit * 4):
        if vote.vote != "down":
            continue
        rows.append(
            DownVote(
                at=vote.at,
                ref=answer.ref if answer else reference_id(vote.question_id),
                question_id=vote.question_id,
                reason=vote.reason,
                repos=answer.repos if answer else [],
                text=answer.question if answer and show_text else "",
            )
        )
    return rows[:limit]
