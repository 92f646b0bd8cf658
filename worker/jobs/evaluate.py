"""`codebot eval FILE.jsonl`: golden questions through the real agent, scored.

Each line: {"question": "...", "repo": "codebot", "expected_keywords": [...], "expected_files": [...],
"expected_commits": [...]}. An expected commit is a rule resolved against the repo's mirror when
the eval runs, so the golden set stays true as the history grows: `last:PATH` (the newest commit
that changed PATH), `first:PATH` (the commit that added it, across renames) or `subject:TEXT`
(the oldest commit whose message says TEXT).
Per question: keyword hit rate (in the answer), expected files and commits cited and verified,
verified and unverified citations, hops, tokens, seconds. The questions run in-process through
the same QuestionRun as chat (console sink), one after another.

Rows from `codebot feedback export` (worker/jobs/feedback.py) may be `"flagged": true`: users
gave that answer a 👎. Such a row has no expected files, only `rejected_files` (what the
disliked answer cited) and `reasons`; the report marks it 👎 and says how many of the rejected
files the new answer cites again, so a reviewer knows which answers to read first.
"""

from __future__ import annotations

import csv
import json
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError
from rich.console import Console
from rich.table import Table

from config.errors import ConfigError
from config.settings import Settings
from worker.jobs.console import missing_model_message
from worker.jobs.job import QuestionOutcome, QuestionRun
from worker.jobs.question import Question, ReplyTarget, event_identity
from worker.jobs.runtime import Runtime, build_runtime
from worker.ops.redis_connection import connect
from worker.repos.git_read import GitReadError, run_git


class GoldenQuestion(BaseModel):
    question: str
    repo: str | None = None
    expected_keywords: list[str] = Field(default_factory=list)
    expected_files: list[str] = Field(default_factory=list)
    expected_commits: list[str] = Field(default_factory=list)  # rules: last:PATH, first:PATH, subject:TEXT
    flagged: bool = False  # users gave the answer this came from a 👎 (codebot feedback export)
    rejected_files: list[str] = Field(default_factory=list)  # what that answer cited
    reasons: list[str] = Field(default_factory=list)  # why, in the users' words


@dataclass
class EvalRow:
    question: str
    status: str
    keyword_hit_rate: float
    expected_files_cited: float
    expected_commits_cited: float
    flagged: bool
    rejected_files_cited: int  # of a flagged row's rejected files, how many the answer cites again
    verified: int
    unverified: int
    verified_rate: float
    hops: int
    tool_calls: int
    tokens: int
    seconds: float


def load_golden(path: Path) -> list[GoldenQuestion]:
    questions = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the golden set ({exc.strerror})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            questions.append(GoldenQuestion.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValidationError) as exc:
            first = str(exc).splitlines()[0]
            raise ConfigError(f"{path}:{number}: not a golden question ({first})") from None
    return questions


def expected_commit(git_dir: Path, tip: str, rule: str, timeout: float = 60.0) -> str | None:
    """The sha an expected-commit rule names in the history of `tip`, or None."""
    kind, _, value = rule.partition(":")
    if kind == "last":
        args = ["log", "-1", "--follow", "--format=%H", tip, "--", value]
    elif kind == "first":
        args = ["log", "--follow", "--diff-filter=A", "--format=%H", tip, "--", value]
    elif kind == "subject":
        args = ["log", "-F", f"--grep={value}", "--format=%H", tip]
    else:
        raise ConfigError(f"expected commit {rule!r}: use last:PATH, first:PATH or subject:TEXT")
    try:
        found = run_git(git_dir, args, timeout, 10_000_000).data.decode().split()
    except GitReadError:
        return None
    return (found[0] if kind == "last" else found[-1]) if found else None


def score(
    golden: GoldenQuestion, outcome: QuestionOutcome, seconds: float, commits: list[str | None] | None = None
) -> EvalRow:
    lowered = outcome.answer.lower()
    keywords = golden.expected_keywords
    hits = sum(1 for k in keywords if k.lower() in lowered)
    # Sources lines: "- [label](url)", or "- `label`" for a repo without a web URL
    cited_paths = {line for line in outcome.answer.splitlines() if line.startswith(("- [", "- `"))}

    def cited(path: str) -> bool:
        return any(f"{path}:" in c or f"/{path}#" in c for c in cited_paths)

    files_hit = sum(1 for f in golden.expected_files if cited(f))
    repo = golden.repo or ""
    commits_hit = sum(
        1
        for sha in commits or []
        if sha and any(f"{repo}@{sha[:7]}" in c or f"/{sha}" in c for c in cited_paths)
    )
    total = outcome.verified + outcome.unverified
    return EvalRow(
        question=golden.question,
        status=outcome.status,
        keyword_hit_rate=hits / len(keywords) if keywords else 1.0,
        expected_files_cited=files_hit / len(golden.expected_files) if golden.expected_files else 1.0,
        expected_commits_cited=commits_hit / len(commits) if commits else 1.0,
        flagged=golden.flagged,
        rejected_files_cited=sum(1 for f in golden.rejected_files if cited(f)) if golden.flagged else 0,
        verified=outcome.verified,
        unverified=outcome.unverified,
        verified_rate=outcome.verified / total if total else 0.0,
        hops=outcome.hops,
        tool_calls=outcome.tool_calls,
        tokens=outcome.prompt_tokens + outcome.completion_tokens,
        seconds=round(seconds, 2),
    )


def run_one(runtime: Runtime, golden: GoldenQuestion) -> EvalRow:
    repos = [golden.repo] if golden.repo else runtime.whitelist.names()
    question = Question(
        id=event_identity("console", "eval", uuid.uuid4().hex),
        asker="eval",
        target=ReplyTarget(platform="console", channel="eval"),
        text=golden.question,
        repos=repos,
    )
    commits: list[str | None] = []
    if golden.expected_commits and golden.repo and (snapshot := runtime.mirrors.current(golden.repo)):
        git_dir = snapshot.git_dir
        commits = [
            expected_commit(git_dir, snapshot.sha, rule) if git_dir else None
            for rule in golden.expected_commits
        ]
    started = time.monotonic()
    outcome = QuestionRun(runtime, connect(runtime.settings), question).run()
    return score(golden, outcome, time.monotonic() - started, commits)


def run_eval(settings: Settings, file: str, csv_path: str, out: Console) -> int:
    questions = load_golden(Path(file))
    missing_model = missing_model_message(settings)
    if missing_model:
        # every question would end in the same 401 apology: say what to set instead
        out.print(missing_model, markup=False, highlight=False, soft_wrap=True)
        return 2
    runtime = build_runtime(settings)
    for name in {q.repo for q in questions if q.repo}:
        if runtime.whitelist.get(name) is None:
            raise ConfigError(f"{file}: repo {name!r} is not in the whitelist {runtime.whitelist.path}")
        if runtime.mirrors.current(name) is None:
            runtime.mirrors.sync(name)
    rows = [run_one(runtime, golden) for golden in questions]
    out.print(_table(rows, settings.model))
    if rows:
        _print_summary(rows, out)
    with open(csv_path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(EvalRow.__dataclass_fields__))
        writer.writeheader()
        writer.writerows(asdict(row) for row in rows)
    out.print(f"wrote {csv_path}")
    return 0 if all(row.status == "answered" for row in rows) else 1


def _table(rows: list[EvalRow], model: str) -> Table:
    """One line per question: its scores, hops, tokens and time."""
    table = Table(title=f"codebot eval: {len(rows)} questions, model {model}")
    for column in (
        "question",
        "flag",
        "status",
        "keywords",
        "files",
        "commits",
        "verified",
        "unverified",
        "hops",
        "tokens",
        "s",
    ):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row.question[:50],
            "👎" if row.flagged else "",
            row.status,
            f"{row.keyword_hit_rate:.0%}",
            f"{row.expected_files_cited:.0%}",
            f"{row.expected_commits_cited:.0%}",
            str(row.verified),
            str(row.unverified),
            str(row.hops),
            str(row.tokens),
            f"{row.seconds:.1f}",
        )
    return table


def _print_summary(rows: list[EvalRow], out: Console) -> None:
    """The means over all questions, and which answers users flagged to read first."""

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    out.print(
        f"keyword hit rate {mean([r.keyword_hit_rate for r in rows]):.0%} · "
        f"verified citation rate {mean([r.verified_rate for r in rows]):.0%} · "
        f"unverified {sum(r.unverified for r in rows)} · hops {mean([r.hops for r in rows]):.1f} · "
        f"tokens {mean([r.tokens for r in rows]):.0f} · seconds {mean([r.seconds for r in rows]):.1f} per question"
    )
    flagged = [r for r in rows if r.flagged]
    if flagged:
        again = sum(1 for r in flagged if r.rejected_files_cited)
        out.print(
            f"{len(flagged)} question(s) users flagged 👎: {again} of the new answers cite again "
            "a file the disliked answer cited; read those first"
        )
