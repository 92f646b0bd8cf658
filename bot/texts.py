"""Every user-facing text of the chat adapters, in one place (both platforms say the same)."""

from worker.ops.redis_errors import RedisFailure, redis_failure

HELP = (
    "Ask me about the code: mention me with a question, e.g. `@codebot how does retry work in repo:payments-api?`\n"
    "• `repo:NAME` anywhere in the question limits it to that repo.\n"
    "• Reply in my thread to ask a follow-up; the earlier questions and answers are the context.\n"
    "• Every claim links to the exact lines and commit I read.\n"
    "Commands: `/codebot repos`, `/codebot help`; admins: `/codebot refresh` (a repo name or `all`), `/codebot status`."
)
EMPTY_MENTION = "You mentioned me without a question.\n" + HELP
QUEUED = "Got it, looking into the code…"
QUEUE_UNAVAILABLE = (
    "Sorry, I can't take questions right now: my queue (Redis) is unreachable. "
    "Please try again in a minute; an admin can check the Redis server."
)
QUEUE_REFUSES_WRITES = (
    "Sorry, I can't take questions right now: my queue (Redis) is up but refuses to store anything "
    "(it may be out of disk space or memory). Please try again later; an admin can check the Redis server."
)


def queue_trouble(exc: BaseException) -> str:
    """What to tell an asker when Redis failed with `exc` (worker/ops/redis_errors.py)."""
    return QUEUE_REFUSES_WRITES if redis_failure(exc) is RedisFailure.REFUSES_WRITES else QUEUE_UNAVAILABLE


INTAKE_FAILED = (
    "Sorry, I could not take this question (an error on my side, logged for the admins). "
    "Please ask again, perhaps in other words."
)


def waiting(ahead: int) -> str:
    """A waiting question's placeholder: its place in the queue (`ahead` questions before it)."""
    if ahead == 0:
        return "Waiting in the queue: yours is next. I'll start as soon as a worker is free."
    questions = "question" if ahead == 1 else "questions"
    return (
        f"Waiting in the queue: {ahead} {questions} ahead of yours. I'll start as soon as a worker is free."
    )


RATE_LIMITED = "You're asking faster than I can answer. Please try again in {seconds} s."
QUEUE_FULL = "I'm busy with {depth} questions right now. Please try again in a few minutes."
NOT_ADMIN = "Sorry, only codebot admins can run `/codebot {command}`."
UNKNOWN_COMMAND = "Unknown command `{command}`. " + HELP
REFRESH_QUEUED = "Refreshing {names}; I'll tell you when it's done."

# --- Discord ---------------------------------------------------------------------------------
DISCORD_ANSWER_CUT = "_(The answer went on beyond {count} messages; the rest was cut.)_"
DISCORD_SOURCES_TITLE = "Sources"
DISCORD_SOURCES_MORE = "… and {count} more"
DISCORD_ASK_ECHO = "**{user} asked:** {question}"
DISCORD_THREAD_FALLBACK_NAME = "codebot answer"
DISCORD_COMMAND_FAILED = "Sorry, that command failed. Reference: `{ref}`"
DISCORD_CMD_GROUP = "Ask codebot about the team's code"
DISCORD_CMD_ASK = "Ask a question about the code (repo:NAME limits it to one repo)"
DISCORD_CMD_ASK_QUESTION = "Your question, e.g. how does retry work in repo:payments-api?"
DISCORD_CMD_REPOS = "List the repos you can ask about here"
DISCORD_CMD_HELP = "How to use codebot"
DISCORD_CMD_REFRESH = "Admins: fetch the latest commit of a repo (or all)"
DISCORD_CMD_REFRESH_NAME = "A repo name, or all"
DISCORD_CMD_STATUS = "Admins: queue, workers and mirrors"

# --- replies while and after answering (Slack; Discord may share them) ------------------------
PROGRESS = "Looking into the code… {step}"
ANSWER_CUT = "(The answer was cut here: {chars} more characters did not fit.)"
HELP_IN_DM = "In a direct message, just write your question; I only see repos open to every channel."

# --- /codebot refresh -------------------------------------------------------------------------
REFRESH_USAGE = "Usage: `/codebot refresh NAME` or `/codebot refresh all`."

EMPTY_ANSWER = (
    "I found nothing to say about this; try rephrasing the question or naming a repo with `repo:NAME`."
)

# --- feedback on answers (👍/👎) ---------------------------------------------------------------
FEEDBACK_UP_LABEL = "This answer helped"
FEEDBACK_DOWN_LABEL = "This answer did not help"
FEEDBACK_MODAL_TITLE = "What was wrong?"
FEEDBACK_MODAL_LABEL = "Optional: what was missing or wrong (helps improve codebot)"
FEEDBACK_MODAL_SHORT_LABEL = "What was missing or wrong? (optional)"  # Discord: at most 45
FEEDBACK_MODAL_SUBMIT = "Send"
FEEDBACK_MODAL_CLOSE = "Skip"
FEEDBACK_THANKS = "Thanks, noted."
FEEDBACK_EXPIRED = "Thanks, but this answer is too old to take feedback on."

# --- Slack's Agents & AI Apps side panel ---------------------------------------------------------
ASSISTANT_THREAD_TITLE = "Questions about the code"
ASSISTANT_GREETING = (
    "Hi! Ask me anything about {repos}: I answer from the code itself, citing the exact lines. "
    "Add `repo:NAME` to a question to keep it to one repo."
)
ASSISTANT_GREETING_NO_REPOS = (
    "Hi! No repository is open to direct messages yet; ask in a channel where codebot answers, "
    "or ask an admin to open one (see `/codebot repos`)."
)
ASSISTANT_PROMPTS_TITLE = "Try asking:"
ASSISTANT_PROMPT_TITLE = "How is {repo} organised?"
ASSISTANT_PROMPT_MESSAGE = "repo:{repo} Give me a tour: what are the main parts and where do they live?"
ASSISTANT_PROMPT_REPOS_TITLE = "Which repos can I ask about?"
ASSISTANT_PROMPT_REPOS = "Which repositories can you answer questions about?"
FEEDBACK_NOT_STORED = "Sorry, I could not record that right now. Please try again in a minute."
