"""Every text the web console (`codebot web`) shows or says at start, in one place.

The pages' own markup is in bot/web/templates/; what a page says about a login, a refusal or a
question's trace is here, as are the one-line reasons `codebot web` refuses to start.
"""

from __future__ import annotations

MIN_TOKEN_CHARS = 32
MAKE_A_TOKEN = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"

# --- at start (config/errors.py: one line, never a traceback) ----------------------------------
NO_WAY_IN = (
    f"CODEBOT_WEB_TOKEN: not set — the console needs a token (make one with `{MAKE_A_TOKEN}`) "
    "or CODEBOT_WEB_PROXY_USER_HEADER behind an authenticating proxy"
)
PROXY_WITHOUT_TRUSTED_PROXIES = (
    "CODEBOT_WEB_TRUSTED_PROXIES: not set, but CODEBOT_WEB_PROXY_USER_HEADER is — name the addresses "
    "your authenticating proxy connects from (JSON list of IPs or CIDRs, e.g. '[\"127.0.0.1\"]'); "
    "the header is believed only on their connections"
)


def token_too_short(variable: str, length: int) -> str:
    return (
        f"{variable}: {length} characters, the console needs at least {MIN_TOKEN_CHARS} "
        f"(make one with `{MAKE_A_TOKEN}`)"
    )


def listening(where: str) -> str:
    return f"codebot web: the console is at {where} (log in with CODEBOT_WEB_TOKEN)"


# --- the Repos page -------------------------------------------------------------------------------
NEVER = "never"
THIS_MACHINE = "this machine"
ALL_HISTORY = "all"
NOT_CLONED_HERE = "not cloned here"


# --- answers to requests ------------------------------------------------------------------------
UNAUTHORIZED = "unauthorized"
TOO_LARGE = "too large"
WRONG_TOKEN = "That token is not one of the console's."
LOGGED_OUT = "Logged out: that session has ended."


def throttled(seconds: int) -> str:
    return f"Too many failed logins: try again in {seconds} seconds."


NO_SUCH_QUESTION = "No such question among those kept."


def redis_trouble(kind: str) -> str:
    return f"Redis: {kind}"


def history_trouble(kind: str) -> str:
    return f"The history database: {kind}"


# --- a question's trace, as a viewer who may not see the question's words sees it -------------
TRACE_OK = "ok"
TRACE_ERROR = "error"
TRACE_CUT_OFF = "cut off"
UNKNOWN_TOOL = "unknown"
NO_TOOL_CALL = "No tool call."


def trace_counts(ok: int, errors: int, cut_off: int) -> str:
    return f"{ok} ok · {errors} {'error' if errors == 1 else 'errors'} · {cut_off} cut off"


TRACE_FACTS_ONLY = "Tool names and outcomes only: the arguments carry the question's words."


# --- the Quality page's definitions (docs/operations.md says the same) -------------------------
TIME_TO_ANSWER = (
    "Time to answer: from a worker taking the question to its final reply posted (or stored for "
    "the outbox to deliver), for every finished question whatever its outcome (an apology is a "
    "reply too); the wait in the queue is not in it. The same seconds as the metric "
    "codebot_question_seconds and Grafana's time-to-answer panel."
)
ANSWER_RATE = "Answer rate: questions answered from code read, out of every question asked in the range."
NO_ANSWER_IN_THE_CODE = (
    "No answer in the code: the run read no code it could use (only prose, or every tool call "
    "failed): outcome not_an_answer."
)
WE_FAILED = (
    "We failed: budget (the daily token budget was spent), endpoint (the model endpoint refused, "
    "failed, hid its tools or was cut off), infrastructure (repos not synced, a stuck disk, a bug "
    "of ours), limits (the question's deadline, tool rounds or the model's context window ran out)."
)
OTHER_KINDS = "Other: an outcome kind this release does not know (a newer worker's), counted as it is."
HELPFUL_RATE = "👍 helpful rate: each voter's last vote on a question, by the day it was cast."
NO_HISTORY = (
    "No history database here (CODEBOT_HISTORY_URL unset and no history.sqlite3 in "
    "CODEBOT_DATA_DIR): what follows comes from Redis's capped list of the latest questions, "
)
EMPTY_HISTORY = (
    "The history database holds no question yet (is `codebot history record` running?): what "
    "follows comes from Redis's capped list of the latest questions, "
)


def capped_list(count: int, oldest: str) -> str:
    kept = f"{count} question{'' if count == 1 else 's'}"
    return f"{kept}, the oldest from {oldest} UTC; days before that show nothing, and not because nothing was asked."
