"""What the core itself says to people: admin reports, `/codebot status`, repo listings.

The core (worker/, config/) never imports bot/, so the texts it composes live here; the chat
texts of the adapters are in bot/texts.py. Both are Markdown, converted by each adapter.
"""

NO_REPOS_HERE = "No repository is available in this channel."
REPOS_HEADER = "Repos you can ask about here:"
REPO_LINE = "• `{name}`{description} — {state}"
# {age}: worker/repos/freshness.py age_text ("committed 3 d ago, fetched 2 min ago")
REPO_STATE = "commit `{sha}` ({age})"
REPO_REFRESHING = "; a refresh to `{sha}` is under way"
REPO_NOT_SYNCED = "not synced yet"
REFRESH_REPORT = "Refresh finished on worker host `{host}` in {seconds} s:\n{lines}"
REFRESH_LINE_OK = "• `{name}`: at commit `{sha}` ({change})"
REFRESH_CHANGED = "new commit"
REFRESH_UNCHANGED = "already up to date"
REFRESH_LINE_FAILED = "• `{name}`: failed: {error} (still serving {sha})"
REFRESH_JOB_FAILED = (
    "The refresh of {names} did not finish: the worker stopped or timed out. Reference: `{ref}`"
)
STATUS_TITLE = "**codebot status**"
STATUS_QUEUE = "• Queue: {questions} question(s) waiting, {admin} admin job(s)"
STATUS_WORKERS = "• Workers alive: {count}"
STATUS_WORKER_LINE = "  ◦ `{name}` on `{host}`: {state}"
# a worker's tool threads stuck in the kernel (worker/jobs/tool_threads.py)
TOOL_THREADS_STUCK = (
    "{stuck} tool call(s) stuck on a read that never returned (still {capacity} tool threads)"
)
TOOL_THREADS_EXHAUSTED = (
    "TOOL THREADS EXHAUSTED: {stuck} tool calls stuck on reads that never returned, no tool call "
    "can run; check the disk and mounts under the data dir, then restart this worker"
)
HEALTH_TOOL_THREADS_EXHAUSTED = (
    "unhealthy: the tool threads of worker(s) {workers} are exhausted: every one is stuck on a read "
    "that never returned (the disk or a mount may be hung); no question can be answered there"
)
STATUS_FAILED = "• Failed questions in the last hour: {count}"
STATUS_FAILED_REFS = "  ◦ references: {refs}"
STATUS_DELIVERY_RETRYING = (
    "• Answers the platform refused so far, tried again with backoff: {count} (given up after {bound})"
)
STATUS_DELIVERY_GIVEN_UP = "• Answers never delivered (given up) in the last 7 days: {count}"
STATUS_DELIVERY_LINE = "  ◦ `{ref}` on {platform}: {attempts} attempt(s) in {age}; last error: {error}"
STATUS_FEEDBACK = "• Feedback in the last {days} days: {up} 👍, {down} 👎 ({rate} 👍)"
STATUS_FEEDBACK_NONE = "• Feedback in the last {days} days: none yet"
STATUS_REPOS = "• Last refresh per repo:"
STATUS_REPO_LINE = "  ◦ `{name}`: {detail}"
STATUS_REPO_REFRESHED = "commit `{sha}`, refreshed {age} ago on `{host}`"
STATUS_REPO_LOCAL = "commit `{sha}` on this machine, snapshot {age} old"
STATUS_REPO_NEVER = "never refreshed"
STATUS_REPO_ERROR = "; last error: {error}"
STATUS_MODEL = "• Model: `{model}` at `{endpoint}`"
STATUS_MODEL_ENDPOINT = "  ◦ `{model}` at `{endpoint}`: {facts}"
STATUS_MODEL_ERRORS = "• Last model errors (newest first):"
STATUS_MODEL_ERROR_LINE = "  ◦ {age} ago, `{ref}`: {kind}{status}: {detail}"

# --- what a question's outcome tells the asker (worker/jobs/outcomes.py) --------------------------
NOT_AN_ANSWER_PROSE = (
    "I could not answer this from the code: the model replied without using its tools to read "
    "any, also when asked again, so its reply is not passed on."
)
NOT_AN_ANSWER_FAILED_CALLS = (
    "I could not answer this from the code: every tool call the model made failed ({why}). "
    "Naming the repo in the question (`repo:NAME`) may help."
)
NOT_AN_ANSWER_MODEL = "I could not answer this from the code: {failure}."
# A model that would never see the tools is not asked (ModelFailure "tools_unseen"): what was
# learned, by where it was learned (worker/agent/endpoint_memory.py TOOLS_UNSEEN_FROM_*).
TOOLS_UNSEEN = {
    "props": (
        "the chat template of the model server at {host} has no tool support (its /props says so), "
        "so the model would never see codebot's tools and codebot did not ask it"
    ),
    "usage": (
        "the model server at {host} counted fewer prompt tokens than codebot's tool schemas alone "
        "and the model never called a tool there: its chat template drops the tools, so codebot "
        "did not ask it again"
    ),
}
NOT_AN_ANSWER_OPERATOR = (
    "An operator can point codebot at a model and server that call tools (docs/models.md: "
    "llama.cpp's server needs `--jinja`; vLLM needs `--enable-auto-tool-choice`), and "
    "`codebot status` shows what the endpoint accepts."
)
NOT_AN_ANSWER = "{what} **No code was read.**\n\n{operator} Reference: `{ref}`"
CUT_OFF_NOTE = (
    "⚠️ **Cut off:** the model's reply stopped before it finished, so this answer is incomplete. "
    "Asking again may work; if it keeps happening, an operator can look for a proxy or gateway "
    "closing long replies, or raise the model server's output limit. Reference: `{ref}`"
)
CUT_OFF_END = "… _(cut off here)_"
# A reply still coming when its time ran out, before any code was read (ModelFailure "cut")
CUT_OFF_APOLOGY = "⚠️ **Cut off** before any code was read: {failure}. Reference: `{ref}`"
# A run stopped before the model wrote an answer: what it found, never presented as an answer.
# "Cut off" as `codebot ask --help` names its exit code (worker/jobs/exit_codes.py).
STOPPED_NOTE = (
    "⚠️ **Cut off, not an answer:** {why} before the model wrote an answer, so below is only the "
    "code it was reading. {change} Reference: `{ref}`"
)
STOPPED_WHY = {
    "deadline": "the question's time ran out ({seconds:g} s)",
    "hop_limit": "the model used all its tool rounds ({hops})",
    "model_failed": "the model endpoint failed",
    "tool_stuck": "a tool call did not return in time (the disk or a mount may be stuck)",
}
STOPPED_CHANGE = {
    "deadline": "An operator can raise CODEBOT_QUESTION_DEADLINE_SECONDS or use a faster model.",
    "hop_limit": "An operator can raise CODEBOT_MAX_HOPS; asking a narrower question may help.",
    "model_failed": "Asking again may work; `codebot status` shows what the endpoint answered.",
    "tool_stuck": "An operator can check the worker's disk and mounts; `codebot status` counts stuck tool calls.",
}
# A deadline where the model's speeds were measured: what would fit them (worker/agent/time_advice.py)
STOPPED_CHANGE_MEASURED = "{advice}."
STATUS_OUTCOMES = "• Questions so far, by outcome: {counts}"
STATUS_OUTCOMES_NONE = "• Questions so far, by outcome: none yet"
STATUS_OUTCOME_COUNT = "{label} {count}"
# An answer to a question whose chat thread could not be read (worker/jobs/question_context.py)
THREAD_UNREADABLE_NOTE = (
    "_I could not read the earlier messages of this thread, so I answered from your message alone._"
)
# An answer to a question whose thread was longer than the budget (CODEBOT_THREAD_CONTEXT_*)
THREAD_TRIMMED_NOTE = (
    "_This thread is long: I read its first message and the newest {kept}; "
    "{dropped} earlier message(s) were left out._"
)
# The same two for a question asked as a reply outside a thread (its reply chain is the context)
CHAIN_UNREADABLE_NOTE = (
    "_I could not read the messages you replied to, so I answered from your message alone._"
)
CHAIN_TRIMMED_NOTE = (
    "_This reply chain is long: I read its first message and the newest {kept}; "
    "{dropped} earlier message(s) were left out._"
)
# The line an answer starts with for each file of its thread (or its message) not read whole
# (worker/jobs/question_context.py); {name} is the file's name, redacted
FILE_CUT_NOTE = "_I read only the end of `{name}`: it is longer than I can read at once._"
FILE_NOT_READ_NOTES = {
    "binary": "_I did not read `{name}`: it is not a text file._",
    "deleted": "_I could not read `{name}`: it was deleted._",
    "hidden": "_I could not read `{name}`: the workspace's plan hides it._",
    "external": "_I did not read `{name}`: it is stored outside the chat platform._",
    "host": "_I did not read `{name}`: it is not on the chat platform's own file host._",
    "timeout": "_I could not read `{name}`: its download timed out._",
    "not_found": "_I could not read `{name}`: the platform no longer has it (404)._",
    "forbidden": "_I could not read `{name}`: the platform refused to give it (403)._",
    "refused": "_I could not read `{name}`: the platform did not give it (is the app allowed to read files?)._",
    "too_large": "_I did not read `{name}`: it is too large to download._",
    "failed": "_I could not read `{name}`: its download failed._",
    "too_many": "_I did not read `{name}`: I read at most {count} files per question._",
}
FILE_NOTES_MORE = "_…and {count} more file(s) I could not read whole._"

# --- what an answer read (worker/jobs/read_footer.py): repo names, hex shas and numbers only -----
READ_FOOTER = "_Read {commits}._"
READ_COMMIT = "`{repo}` at `{sha}` ({age})"
READ_MORE = "{count} more repo(s) (`/codebot repos` lists their commits)"
READ_REFRESHING = "_A refresh to a newer commit is under way for {repos}: asking again shortly reads it._"
READ_REFRESHING_REPO = "`{repo}` (to `{sha}`)"
