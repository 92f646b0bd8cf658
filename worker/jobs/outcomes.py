"""What a question's run is named for: an answer only when code was read.

Every question ends in one outcome kind, counted in `codebot_questions_total{status=…}` and
`codebot status`, marked in chat, and `codebot ask`'s exit code (docs/operations.md; the codes and
their words: worker/jobs/exit_codes.py):

| kind | what happened | chat | `codebot ask` |
|---|---|---|---|
| answered | the reply came from code the run read (a successful tool call on a repo in scope) | ✅ | 0 |
| not_an_answer | no code was read (prose only, every call failed, no usable call): said so, the prose not shown | ⚠️ | 3 |
| cut_off | the reply was cut off before the model finished, or the run was stopped (deadline, tool rounds, endpoint failure) before the model wrote an answer: shown with a visible "Cut off" note naming why; or, before any code was read, the endpoint was still sending its reply when its time ran out: an apology saying so | ⚠️ | 4 |
| failed | the model endpoint failed, a bug, or the worker stopped: an apology | ⚠️ | 1 |
| budget_spent, no_snapshot | refused before the model was asked: the daily budget, repos not synced | ⚠️ | 5 |

(`already_answered` is a retried run that found the final message stored: it counts, but the
asker saw the first run's outcome.)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from worker.agent.endpoint_memory import display_host
from worker.agent.loop import AgentResult
from worker.jobs import texts
from worker.jobs.exit_codes import EXIT_CODES
from worker.jobs.outbox import Delivery

Status = Literal[
    "answered", "not_an_answer", "cut_off", "already_answered", "failed", "budget_spent", "no_snapshot"
]
# Every kind a finished question is counted under (metrics, `codebot status`), in the order shown.
STATUSES: tuple[Status, ...] = (
    "answered",
    "not_an_answer",
    "cut_off",
    "failed",
    "budget_spent",
    "no_snapshot",
    "already_answered",
)
LABELS: dict[str, str] = {
    "answered": "answered",
    "not_an_answer": "not an answer (no code read)",
    "cut_off": "cut off",
    "failed": "failed",
    "budget_spent": "refused: budget spent",
    "no_snapshot": "refused: repos not synced",
    "already_answered": "retried, answered before",
}
# What became of the final message this run stored (worker.jobs.outbox.Delivery), or "direct":
# posted without being stored (Redis was down), "lost": not even that; "" when it stored none.
DeliveryState = Delivery | Literal["", "direct", "lost"]


@dataclass
class QuestionOutcome:
    """What one run of a question did: logged, counted, accounted, and kept by RQ as the job's
    result (`as_record()`, a plain dict, so `/codebot status` reads results of any release)."""

    status: Status
    ref: str
    reason: str | None = None  # why: the model's failure, "crash" (a bug of ours), failed calls
    delivery: DeliveryState = ""
    answer: str = ""
    hops: int = 0
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    verified: int = 0
    unverified: int = 0
    partial: bool = False
    stop_reason: str | None = None
    failure_kind: str | None = None  # what kind of model failure (worker/agent/model_errors.py)
    tools: dict[str, int] = field(default_factory=dict)  # tool name -> calls
    snapshots: dict[str, str] = field(default_factory=dict)  # repo -> commit read
    trace: list[str] = field(default_factory=list)  # one line per tool call
    seconds: float = 0.0

    def as_record(self) -> dict[str, Any]:
        return asdict(self)


# `codebot ask`'s exit codes: the one table is worker/jobs/exit_codes.py (the help is written from it)
EXIT_ANSWERED = EXIT_CODES["answered"]
EXIT_NOT_AN_ANSWER = EXIT_CODES["not_an_answer"]
EXIT_CUT_OFF = EXIT_CODES["cut_off"]
EXIT_REFUSED = EXIT_CODES["budget_spent"]


NO_CODE_READ_FAILURES = ("no_tool_calls", "tools_unseen")  # model failures that end as not_an_answer
# a reply the endpoint was still sending when its time ran out: what the asker reads says "cut off"
CUT_OFF_FAILURES = ("cut",)


def no_code_read_failure(kind: str, evidence: str, said: str, base_url: str) -> str:
    """What a failure that read no code says: for a model never asked, what was learned, where,
    and of which server (host and port only); else the failure as it says it (`said`)."""
    text = texts.TOOLS_UNSEEN.get(evidence) if kind == "tools_unseen" else None
    return text.format(host=display_host(base_url)) if text else said


def not_an_answer_text(result: AgentResult | None, ref: str, failure: str = "") -> str:
    """What the asker reads when no code was read: what happened, that no code was read, and
    what an operator can change. The model's own prose is not passed on. `failure`: the run
    ended without any text (ModelFailure "no_tool_calls"), said as it says it."""
    if result is None:
        what = texts.NOT_AN_ANSWER_MODEL.format(failure=failure)
    elif result.failures:
        what = texts.NOT_AN_ANSWER_FAILED_CALLS.format(why=", ".join(result.failures))
    elif result.tool_calls:
        what = texts.NOT_AN_ANSWER_FAILED_CALLS.format(why=f"{result.tool_calls} call(s)")
    else:
        what = texts.NOT_AN_ANSWER_PROSE
    return texts.NOT_AN_ANSWER.format(what=what, operator=texts.NOT_AN_ANSWER_OPERATOR, ref=ref)


def cut_off_text(text: str) -> str:
    """The model's cut-off text, ended visibly (a code block it left open is closed first)."""
    shown = text.rstrip()
    if shown.count("```") % 2:
        shown += "\n```"
    return f"{shown}\n\n{texts.CUT_OFF_END}"


def cut_off_markdown(checked_markdown: str, ref: str) -> str:
    """The note first (it survives any split into messages), then what there was."""
    return f"{texts.CUT_OFF_NOTE.format(ref=ref)}\n\n{checked_markdown}"


def stopped_markdown(
    checked_markdown: str, stopped: str, ref: str, seconds: float, hops: int, advice: str = ""
) -> str:
    """A run stopped before the model wrote an answer: the note naming the limit and what to
    change first (`advice`: what fits the measured speeds, for a deadline), then the code it was
    reading."""
    why = texts.STOPPED_WHY.get(stopped, texts.STOPPED_WHY["model_failed"]).format(seconds=seconds, hops=hops)
    change = texts.STOPPED_CHANGE.get(stopped, texts.STOPPED_CHANGE["model_failed"])
    if stopped == "deadline" and advice:
        change = texts.STOPPED_CHANGE_MEASURED.format(advice=advice[:1].upper() + advice[1:])
    return f"{texts.STOPPED_NOTE.format(why=why, change=change, ref=ref)}\n\n{checked_markdown}"
