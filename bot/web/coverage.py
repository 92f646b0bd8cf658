"""What each outcome kind means for the Quality page: answered, no answer in the code, or we failed.

A question that got no answer is either a gap in what the code can answer (the run searched and
found nothing it could use) or a failure of ours (the budget, the model endpoint, the
infrastructure, or a limit of the run). The answer rate counts both as not answered; the page
shows them apart, so a 401 from the endpoint is never read as a gap in the code.

The one table is `COVERAGE`, over the kinds of worker/jobs/outcomes.py (`STATUSES`); a model
failure's kind (worker/agent/model_errors.py, recorded as `failure_kind`) refines it where the
same status has causes on both sides (`BY_FAILURE_KIND`), and a bug of ours is `reason` "crash".
"""

from __future__ import annotations

from dataclasses import dataclass

ANSWERED = "answered"
NO_ANSWER = "no answer in the code"
WE_FAILED = "we failed"
OTHER = "other"  # a kind this release does not know (a newer worker's): counted, never guessed at
CLASSES = (ANSWERED, NO_ANSWER, WE_FAILED, OTHER)

BUDGET, ENDPOINT, INFRASTRUCTURE, LIMITS = "budget", "endpoint", "infrastructure", "limits"
FAILURE_CAUSES = (BUDGET, ENDPOINT, INFRASTRUCTURE, LIMITS)


@dataclass(frozen=True)
class Coverage:
    kind: str  # one of CLASSES
    cause: str = ""  # for WE_FAILED: one of FAILURE_CAUSES


# status -> what it means. `already_answered` (a retry that found the answer stored) is not in
# the history: the asker's outcome is the first run's.
COVERAGE: dict[str, Coverage] = {
    "answered": Coverage(ANSWERED),
    # the run read no code it could use (prose only, or every tool call failed): nothing answered it
    "not_an_answer": Coverage(NO_ANSWER),
    # stopped by the question's deadline or tool rounds (or the reply's length) before it finished
    "cut_off": Coverage(WE_FAILED, LIMITS),
    # the model endpoint failed (401, 404, 429, 5xx, unreachable, a reply we could not use)
    "failed": Coverage(WE_FAILED, ENDPOINT),
    # refused before the model was asked
    "budget_spent": Coverage(WE_FAILED, BUDGET),
    "no_snapshot": Coverage(WE_FAILED, INFRASTRUCTURE),  # the repos were not synced
}
# A model failure's kind that moves its question elsewhere than its status says.
BY_FAILURE_KIND: dict[str, Coverage] = {
    "tools_unseen": Coverage(WE_FAILED, ENDPOINT),  # not_an_answer: the endpoint hides the tools
    "no_tool_calls": Coverage(WE_FAILED, ENDPOINT),  # not_an_answer: no usable tool call at all
    "cut": Coverage(WE_FAILED, ENDPOINT),  # cut_off: the endpoint still sending at the deadline
    "deadline": Coverage(WE_FAILED, LIMITS),  # failed: time ran out before any code was read
    "context": Coverage(WE_FAILED, LIMITS),  # failed: the model's context window is too small
    "tool_stuck": Coverage(WE_FAILED, INFRASTRUCTURE),  # failed: a disk or mount stopped answering
    "tool_not_started": Coverage(WE_FAILED, INFRASTRUCTURE),
}
# The statuses whose failure_kind is read (every model failure ends in one of them).
REFINED_STATUSES = ("not_an_answer", "cut_off", "failed")
CRASH = Coverage(WE_FAILED, INFRASTRUCTURE)  # failed with reason "crash": a bug of ours, or the worker


def coverage_of(status: str, failure_kind: str | None, crashed: bool) -> Coverage:
    """What one finished question's outcome means (see the tables above)."""
    if status == "answered":
        return COVERAGE[status]
    if crashed:
        return CRASH
    if failure_kind and failure_kind in BY_FAILURE_KIND:
        return BY_FAILURE_KIND[failure_kind]
    return COVERAGE.get(status, Coverage(OTHER))
