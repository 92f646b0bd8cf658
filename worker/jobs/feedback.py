"""Feedback on answers: 👍/👎 with an optional reason, kept in Redis, exported for `codebot eval`.

When an answer is stored (worker/jobs/job.py), what a vote on it will be filed with is kept
under its question id: platform, channel, asker, repos, the commit of each repo read, the
verified citations, the reference id, and the question's text (`feedback_keep_question_text`;
docs/configuration.md, "Feedback", says what is kept and for how long: `feedback_keep_days`).

A vote is one per user per answer: clicking the same button twice counts once, clicking the
other one replaces the vote (its reason goes with it). A reason (the 👎 modal) is attached to
the user's vote. Every new or changed vote counts in `codebot_feedback_total{platform,vote}`.

`codebot feedback list` shows recent votes; `codebot feedback export` writes one JSON line per
answer that `codebot eval` reads (worker/jobs/evaluate.py): the question, its repo, the files
its verified citations named as `expected_files` when users liked it, or `flagged: true` with
those files as `rejected_files` and the reasons when they did not.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from redis import Redis
from redis.client import Pipeline

from config.settings import Settings
from worker.history.events import append_event
from worker.jobs.question import Question, reference_id
from worker.jobs.sink import Answer
from worker.ops.metrics import count
from worker.repos.secrets.redaction import get_redactor

ANSWER_KEY_PREFIX = "codebot:feedback:answer:"  # + question id -> hash: what the answer was
VOTES_KEY_PREFIX = "codebot:feedback:votes:"  # + question id -> hash: user -> {"vote", "reason", "at"}
RECENT_KEY = "codebot:feedback:recent"  # sorted set: question id -> time of its latest vote
REASON_MAX_CHARS = 1000
SHOWN_QUESTION_CHARS = 80

Vote = Literal["up", "down"]
VOTES: tuple[Vote, ...] = ("up", "down")
Recorded = Literal["new", "changed", "same", "refused"]

# KEYS: votes hash, recent set. ARGV: user, vote, entry json, now, ttl seconds, question id.
# "same" when the user's vote is already this one; else the entry replaces it.
_VOTE = """
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old and cjson.decode(old)['vote'] == ARGV[2] then return 'same' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[6])
if old then return 'changed' end
return 'new'
"""


def _keep_seconds(settings: Settings) -> int:
    return int(settings.feedback_keep_days * 86400)


def record_answer(
    redis: Redis,
    settings: Settings,
    question: Question,
    answer: Answer,
    commits: dict[str, str],
    into: Pipeline | None = None,
) -> None:
    """What a vote on this answer will be filed with (written by the run that stored the answer,
    with its question's record); `into`: queued on that pipeline, which the caller runs."""
    cited = [
        f"{s.repo}:{s.path}#L{s.start}" + (f"-L{s.end}" if s.end != s.start else "") for s in answer.sources
    ]
    fields: dict[str | bytes, bytes | float | int | str] = {
        "platform": question.target.platform,
        "channel": question.target.channel,
        "thread": question.target.thread or "",
        "asker": question.asker,
        "repos": json.dumps(question.repos),
        "commits": json.dumps(commits),
        "cited": json.dumps(cited),
        "unverified": str(answer.unverified),
        "partial": "1" if answer.partial else "0",
        "ref": reference_id(question.id),
        "answered_at": f"{time.time():.3f}",
        "question": question.text if settings.feedback_keep_question_text else "",
    }
    key = ANSWER_KEY_PREFIX + question.id
    pipe = redis.pipeline() if into is None else into
    pipe.hset(key, mapping=fields)
    pipe.expire(key, _keep_seconds(settings))
    if into is None:
        pipe.execute()


def record_vote(
    redis: Redis,
    settings: Settings,
    question_id: str,
    platform: str,
    user: str,
    vote: Vote,
    channel: str,
) -> Recorded:
    """The user's 👍 or 👎 on an answer: new, changed (replacing the other), or the same again.
    Refused (nothing stored) unless the answer is known and was posted on this platform in
    `channel` (the channel, or its thread, the click came from): a button value naming another
    channel's answer, or none, is not a vote."""
    if vote not in VOTES:
        raise ValueError(f"not a vote: {vote!r}")
    placed = redis.hmget(ANSWER_KEY_PREFIX + question_id, ["platform", "channel", "thread"])
    answered_on, *answered_in = (_text(value) if value else "" for value in placed)
    if not channel or answered_on != platform or channel not in answered_in:
        return "refused"
    now = time.time()
    entry = json.dumps({"vote": vote, "reason": "", "at": round(now, 3), "platform": platform})
    result = redis.eval(
        _VOTE,
        2,
        VOTES_KEY_PREFIX + question_id,
        RECENT_KEY,
        user,
        vote,
        entry,
        f"{now:.3f}",
        _keep_seconds(settings),
        question_id,
    )
    recorded: Recorded = _text(result)  # type: ignore[assignment]
    if recorded in ("new", "changed"):
        count(redis, "codebot_feedback_total", platform=platform, vote=vote)
        vote_facts = {"question_id": question_id, "user": user, "vote": vote, "platform": platform}
        append_event(redis, "vote", vote_facts)
        redis.zremrangebyscore(RECENT_KEY, "-inf", now - _keep_seconds(settings))
    return recorded


def record_reason(redis: Redis, settings: Settings, question_id: str, user: str, reason: str) -> bool:
    """Attach a reason (redacted, trimmed) to the user's vote; False when they have none."""
    key = VOTES_KEY_PREFIX + question_id
    raw = redis.hget(key, user)
    if raw is None:
        return False
    entry = json.loads(_text(raw))
    entry["reason"] = get_redactor().redact(reason.strip())[:REASON_MAX_CHARS]
    redis.hset(key, user, json.dumps(entry))
    append_event(redis, "reason", {"question_id": question_id, "user": user, "reason": entry["reason"]})
    redis.expire(key, _keep_seconds(settings))
    return True


@dataclass(frozen=True)
class AnswerRecord:
    question_id: str
    question: str = ""
    platform: str = ""
    channel: str = ""
    asker: str = ""
    repos: list[str] = field(default_factory=list)
    commits: dict[str, str] = field(default_factory=dict)
    cited: list[str] = field(default_factory=list)  # verified citations: repo:path#L1-L5
    ref: str = ""
    answered_at: float = 0.0

    @property
    def cited_files(self) -> list[str]:
        """The paths its verified citations named, once each, in order."""
        paths = [citation.partition(":")[2].partition("#")[0] for citation in self.cited]
        return list(dict.fromkeys(path for path in paths if path))


@dataclass(frozen=True)
class VoteRecord:
    question_id: str
    user: str
    vote: Vote
    reason: str
    at: float
    platform: str


def answer_record(redis: Redis, question_id: str) -> AnswerRecord | None:
    raw = {_text(k): _text(v) for k, v in redis.hgetall(ANSWER_KEY_PREFIX + question_id).items()}
    if not raw:
        return None
    return AnswerRecord(
        question_id=question_id,
        question=raw.get("question", ""),
        platform=raw.get("platform", ""),
        channel=raw.get("channel", ""),
        asker=raw.get("asker", ""),
        repos=json.loads(raw.get("repos") or "[]"),
        commits=json.loads(raw.get("commits") or "{}"),
        cited=json.loads(raw.get("cited") or "[]"),
        ref=raw.get("ref", ""),
        answered_at=float(raw.get("answered_at") or 0),
    )


def votes_of(redis: Redis, question_id: str) -> list[VoteRecord]:
    votes = []
    for user, raw in redis.hgetall(VOTES_KEY_PREFIX + question_id).items():
        entry = json.loads(_text(raw))
        votes.append(
            VoteRecord(
                question_id=question_id,
                user=_text(user),
                vote=entry["vote"],
                reason=entry.get("reason", ""),
                at=float(entry.get("at", 0)),
                platform=entry.get("platform", ""),
            )
        )
    return sorted(votes, key=lambda v: v.at)


def recent_question_ids(redis: Redis, since: float = 0.0, limit: int | None = None) -> list[str]:
    """Answers voted on since `since` (epoch seconds), the latest vote first."""
    num = -1 if limit is None else limit
    found = redis.zrevrangebyscore(RECENT_KEY, "+inf", since, start=0, num=num)
    return [_text(raw) for raw in found]


def recent_votes(redis: Redis, limit: int = 20) -> list[tuple[VoteRecord, AnswerRecord | None]]:
    """The latest `limit` votes, each with the answer it is on (None once that has expired)."""
    rows: list[tuple[VoteRecord, AnswerRecord | None]] = []
    for question_id in recent_question_ids(redis, limit=limit):
        record = answer_record(redis, question_id)
        rows.extend((vote, record) for vote in votes_of(redis, question_id))
    rows.sort(key=lambda row: -row[0].at)
    return rows[:limit]


@dataclass(frozen=True)
class Tally:
    up: int
    down: int

    @property
    def up_rate(self) -> float | None:
        total = self.up + self.down
        return self.up / total if total else None


def tally(redis: Redis, since: float) -> Tally:
    """Current votes on answers voted on since `since` (a changed vote counts as its latest)."""
    up = down = 0
    for question_id in recent_question_ids(redis, since=since):
        for vote in votes_of(redis, question_id):
            if vote.at >= since:
                up += vote.vote == "up"
                down += vote.vote == "down"
    return Tally(up, down)


def export_rows(redis: Redis) -> Iterator[dict[str, Any]]:
    """One golden-question row per voted answer whose question is known, oldest vote first.
    More 👍 than 👎: the files its verified citations named are `expected_files`; otherwise it
    is `flagged`, those files are `rejected_files` and the reasons go with it."""
    for question_id in reversed(recent_question_ids(redis)):
        record = answer_record(redis, question_id)
        votes = votes_of(redis, question_id)
        if record is None or not record.question or not votes:
            continue
        ups = sum(1 for v in votes if v.vote == "up")
        downs = len(votes) - ups
        row: dict[str, Any] = {"question": record.question}
        if len(record.repos) == 1:
            row["repo"] = record.repos[0]
        if ups > downs:
            row["expected_files"] = record.cited_files
        else:
            row["flagged"] = True
            row["rejected_files"] = record.cited_files
            row["reasons"] = [v.reason for v in votes if v.vote == "down" and v.reason]
        row["feedback"] = {
            "up": ups,
            "down": downs,
            "question_id": question_id,
            "ref": record.ref,
            "platform": record.platform,
            "commits": record.commits,
        }
        yield row


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
