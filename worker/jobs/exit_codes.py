"""`codebot ask`'s exit codes: one table, outcome → exit code → words.

`codebot ask --help` is written from it, `codebot ask` exits by it (worker/jobs/console.py),
and the reply of each outcome says the words its code stands for: a reply that says "cut off"
exits with the code the help gives for cut off (tests/test_ask_exit_codes.py runs each one).
This module imports nothing, so `codebot --help` can show the table without loading the worker.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AskExit:
    code: int
    words: str  # what `codebot ask --help` says the code means
    # what the printed reply of this outcome says (any one of them), and no other outcome's
    # reply does; () for an answer, whose words are the model's own
    says: tuple[str, ...] = ()


EXIT_USAGE = 2  # refused before it was asked: an empty question, an unknown repo, no model endpoint
USAGE_WORDS = "the question or setup refused"

# In the order `ask --help` lists them; outcomes sharing a code share its words.
ASK_EXITS: dict[str, AskExit] = {
    "answered": AskExit(0, "answered from the code it read"),
    "failed": AskExit(1, "failed", ("Sorry, I could not answer:", "Sorry, something went wrong")),
    "not_an_answer": AskExit(3, "not an answer (no code was read)", ("No code was read",)),
    "cut_off": AskExit(4, "cut off", ("Cut off",)),
    "budget_spent": AskExit(
        5, "refused (daily budget spent, repos not synced)", ("question budget is used up",)
    ),
    "no_snapshot": AskExit(
        5, "refused (daily budget spent, repos not synced)", ("has been synced on this worker",)
    ),
}
EXIT_CODES: dict[str, int] = {kind: row.code for kind, row in ASK_EXITS.items()}
EXIT_FAILED = ASK_EXITS["failed"].code


def exit_code(kind: str) -> int:
    """`codebot ask`'s exit code for an outcome kind (an unknown one is a failure)."""
    return EXIT_CODES.get(kind, EXIT_FAILED)


def ask_exit_codes_help() -> str:
    """The table as one line for `codebot ask --help`: each code once, in order."""
    words = {row.code: row.words for row in ASK_EXITS.values()}
    words[EXIT_USAGE] = USAGE_WORDS
    return "exit codes: " + "; ".join(f"{code} {words[code]}" for code in sorted(words))
