"""The settings' first sections as fields: where things live, the model, the agent's budgets,
operations, delivery, feedback (CoreSettings), then the chat platforms (ChatSettings).

`config.settings.Settings` extends ChatSettings with the rest; use that, never these. The classes
chain (each extends the one before) so that pydantic keeps every field in the order written here:
docs/configuration.md lists them in that order (`python -m config.docgen`, which reads each
setting's meaning from its comment), and a validator may read an earlier field's value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings

# The packaged whitelist, used when the default relative path does not exist in the working
# directory (e.g. `codebot` run from elsewhere after `pip install -e`).
PACKAGED_REPOS_FILE = Path(__file__).resolve().parent / "repos.toml"
DEFAULT_REPOS_FILE = Path("config/repos.toml")


def _env(name: str) -> Any:
    """An alias for a variable named by the contract rather than `CODEBOT_<FIELD>`."""
    return AliasChoices(name)


class CoreSettings(BaseSettings):
    """Where things live, the model, the agent's budgets, operations, delivery and feedback."""

    # --- where things live -------------------------------------------------------------------
    # The queue; unset: an embedded Redis under the data dir.
    redis_url: str | None = Field(default=None, validation_alias=_env("REDIS_URL"))
    # Instead of REDIS_URL, for a Redis whose failover is Sentinel: the sentinels as
    # host:port,host:port (docs/operations.md, "Redis Sentinel").
    redis_sentinels: str = Field(default="", validation_alias=_env("REDIS_SENTINELS"))
    # The name the sentinels monitor the primary under (`sentinel monitor <name> ...`).
    redis_sentinel_master: str = Field(default="mymaster", validation_alias=_env("REDIS_SENTINEL_MASTER"))
    # The sentinels' own password, if they require one.
    redis_sentinel_password: SecretStr | None = Field(
        default=None, validation_alias=_env("REDIS_SENTINEL_PASSWORD")
    )
    # The primary's (and replicas') password with REDIS_SENTINELS; also used for a REDIS_URL without one.
    redis_password: SecretStr | None = Field(default=None, validation_alias=_env("REDIS_PASSWORD"))
    data_dir: Path = Path("data")  # mirrors, snapshots, the embedded Redis
    # The repository whitelist (config/repos.toml when it exists, else the packaged example).
    repos_file: Path = DEFAULT_REPOS_FILE

    # --- the model ---------------------------------------------------------------------------
    # Any OpenAI-compatible endpoint's key; may be left out when OPENAI_BASE_URL is set (Ollama).
    openai_api_key: SecretStr | None = Field(default=None, validation_alias=_env("OPENAI_API_KEY"))
    # The endpoint (docs/models.md); unset: OpenAI.
    openai_base_url: str | None = Field(default=None, validation_alias=_env("OPENAI_BASE_URL"))
    model: str = "gpt-5-mini"  # the chat model
    # The first model turn must call a tool. An endpoint that refuses "required" (llama.cpp
    # servers, older vLLM, some OpenRouter routes) is detected and sent "auto" instead
    # (worker/agent/request_shape.py); false sends "auto" from the start.
    tool_choice_required: bool = True
    # Ask for streamed replies (text as it is written); an endpoint that refuses is detected
    # and asked without streaming from then on.
    model_stream: bool = True
    # The whole of one model attempt, first byte to last: a reply still trickling in after
    # this long is cut (each attempt also gets only its share of the question's time left).
    model_timeout_seconds: float = Field(default=60.0, gt=0)
    # Retries of a failed model call, within the question's deadline.
    model_max_retries: int = Field(default=2, ge=0, le=10)
    # The endpoint's context window in tokens. 0: ask the server (Ollama /api/ps and /api/show,
    # vLLM max_model_len, llama-server /props, OpenRouter and LM Studio model lists) or learn it
    # from its "maximum context length" error; unknown, only context_budget_chars applies.
    model_context_tokens: int = Field(default=0, ge=0)
    # Tokens kept free for the model's reply: at most a quarter of the window.
    model_answer_reserve_tokens: int = Field(default=2048, ge=0)
    # The bound every completion request carries (`max_tokens`; `max_completion_tokens` for
    # OpenAI), in tokens. 0: the answer reserve above where the window is known, else 8,192.
    # Lowered further to what the server's measured speed can write in the time left.
    model_max_tokens: int = Field(default=0, ge=0)
    # Asking the server for its window (/api/show, /v1/models, ...) takes at most this long, once
    # per endpoint per model_memory_seconds.
    model_discovery_timeout_seconds: float = Field(default=5.0, gt=0)
    # What an endpoint refused or accepts, and its window, are remembered this long (Redis and
    # each process), then tried again: an upgraded server gets a fresh look.
    model_memory_seconds: float = Field(default=86400.0, gt=0)
    # --- the agent's budgets -------------------------------------------------------------------
    max_hops: int = Field(default=12, ge=1, le=100)  # model turns that may call tools
    budget_warning_hops: int = Field(default=3, ge=0)  # notes start this many hops before the end
    # One question, all model calls and retries included.
    question_deadline_seconds: float = Field(default=150.0, gt=0)
    # Everything sent to the model, tool schemas included (~6,000), is kept under this many
    # characters, and under the endpoint's window when known (docs/models.md); the oldest tool
    # output is trimmed first.
    context_budget_chars: int = Field(default=120_000, ge=4000)
    history_max_turns: int = Field(default=6, ge=0)  # earlier turns of a thread sent as context
    # Earlier messages of the chat thread a question is asked in that go to the model: its root
    # and the newest, at most this many (the oldest dropped first, the model told so). 0: none.
    thread_context_messages: int = Field(default=50, ge=0, le=1000)
    # Characters of those messages (redacted) the model gets at most; also the budget of a log
    # given to `codebot ask --context FILE QUESTION` or on its stdin (its end kept). 0: none.
    thread_context_chars: int = Field(default=12_000, ge=0, le=200_000)
    # Bytes of each text file attached to the thread or the question that are downloaded (a
    # longer one: its end, the model and the asker told). 0: attached files are not read.
    thread_context_file_bytes: int = Field(default=1_048_576, ge=0, le=16 * 1_048_576)
    # Seconds one question waits for its attached files: they download at once, each within this.
    thread_context_file_seconds: float = Field(default=10.0, gt=0, le=120)
    # Tool calls run per model turn; more in one turn get an error result the model can read
    # (1 also asks the endpoint for parallel_tool_calls=false).
    max_tool_calls_per_turn: int = Field(default=8, ge=1, le=128)
    # chat.update is Tier 3 (~50/min per workspace): one edit per 1.5 s per question (docs/platform-notes.md, pitfall 21)
    progress_min_interval_seconds: float = Field(default=1.5, ge=0)
    # A streamed answer shows the model's text only up to the word being written and at least
    # this many characters back: a secret or a citation split across pieces is judged whole.
    stream_holdback_chars: int = Field(default=24, ge=0, le=1000)
    # RQ's own worker maintenance pass (RQ's default is 10 min).
    worker_maintenance_interval_seconds: int = Field(default=30, ge=1)
    # A dead worker's questions (worker/jobs/reaper.py): a busy worker proves it is alive every
    # `worker_heartbeat_seconds`; a question whose worker missed its beat by
    # `worker_heartbeat_grace_seconds` is retried elsewhere (or the asker told) by the next
    # reaper pass, run every `reaper_interval_seconds` on every worker machine.
    worker_heartbeat_seconds: int = Field(default=5, ge=1)
    # A missed heartbeat by this much and the question is retried.
    worker_heartbeat_grace_seconds: int = Field(default=15, ge=1)
    # A question waiting in the queue longer than this gets a placeholder saying so, with its
    # place in the queue (bot/queue_notices.py), from the chat adapter (no worker needed).
    queue_notice_after_seconds: float = Field(default=20.0, ge=0)
    # A waiting question's placeholder is edited at most once per this many seconds, and only
    # when its place changed; each adapter process edits at most 40 a minute (chat.update is
    # Tier 3, about 50 a minute per workspace; Discord allows 5 edits per 5 s per channel).
    queue_notice_update_seconds: float = Field(default=10.0, ge=0)
    # How often each worker machine looks for abandoned questions.
    reaper_interval_seconds: float = Field(default=5.0, gt=0)
    # A question taken from the queue by a worker that died before starting it (or lost in a
    # Redis failover between the two) is queued again once found so for this long.
    queue_orphan_grace_seconds: float = Field(default=60.0, gt=0)
    # Many machines (worker/repos/refresh.py): each machine checks this often for scheduled
    # refreshes (`refresh_minutes` in repos.toml) and for a newer commit another machine fetched
    # (the fallback: a refresh recorded anywhere wakes every machine at once, worker/repos/announcements.py).
    refresh_check_seconds: float = Field(default=30.0, gt=0)
    # Before answering, a worker catches up to the commit last refreshed anywhere, waiting at
    # most this long for git (else it answers from its last good snapshot) ...
    catch_up_timeout_seconds: float = Field(default=30.0, gt=0)
    # ... and after a failed catch-up it serves its last good snapshot this long before trying again.
    catch_up_retry_seconds: float = Field(default=300.0, ge=0)

    # --- operations --------------------------------------------------------------------------
    # Text (for a terminal) or json (one object per line).
    log_format: str = Field(default="text", pattern="^(text|json)$")
    # Log the question text (never code) with each question: off by default, for privacy.
    log_question_text: bool = False
    metrics_port: int | None = Field(default=None, ge=0, le=65535)  # serve /metrics here; unset: off
    # The address /metrics listens on; 0.0.0.0 (every interface) for a Prometheus on another machine.
    metrics_host: str = "127.0.0.1"
    daily_token_budget: int = Field(default=0, ge=0)  # tokens per UTC day for everyone; 0: no limit
    model_input_usd_per_million_tokens: float = Field(default=0.0, ge=0)  # for cost reports; 0: unknown
    model_output_usd_per_million_tokens: float = Field(default=0.0, ge=0)  # for cost reports; 0: unknown

    # --- delivery: answers are stored, then posted until the platform takes them ------------
    # An answer Slack or Discord refused is tried again after this long, doubling ...
    delivery_retry_initial_seconds: float = Field(default=2.0, gt=0)
    # ... up to this long between two attempts.
    delivery_retry_max_seconds: float = Field(default=60.0, gt=0)
    # An answer still refused after this long is given up: logged as an error, in `codebot status`.
    delivery_give_up_seconds: float = Field(default=86400.0, gt=0)
    # How often each worker machine looks for answers due for another attempt.
    delivery_check_seconds: float = Field(default=1.0, gt=0)
    # One delivery attempt holds its question this long before another machine may take over.
    delivery_lease_seconds: float = Field(default=120.0, gt=0)
    # Answers one machine tries to deliver at once (an attempt may wait out a rate limit).
    delivery_max_parallel: int = Field(default=8, ge=1, le=64)

    # --- feedback (👍/👎 on answers, `codebot feedback`) -----------------------------------------
    # How long an answer's feedback record (and the votes on it) is kept in Redis.
    feedback_keep_days: float = Field(default=90.0, gt=0)
    # Keep the question's text with its feedback record, for `codebot feedback export`; false:
    # votes are counted but the export has no questions to offer.
    feedback_keep_question_text: bool = True

    # --- history (the operators' database, `codebot history`, docs/history.md) -----------------
    # Where the history is kept: unset, SQLite at `<CODEBOT_DATA_DIR>/history.sqlite3`; for
    # several machines a PostgreSQL URL, `postgresql://user:password@host/db`.
    history_url: SecretStr | None = None
    # How long every table of the history keeps a row (questions, tool calls, votes, reasons,
    # syncs, model events alike, so a vote never outlives its question).
    history_retention_days: float = Field(default=90.0, gt=0)


class ChatSettings(CoreSettings):
    """The chat platforms: Slack and Discord, their limits, Slack streaming."""

    # --- chat platforms ----------------------------------------------------------------------
    # Slack's Bot User OAuth Token, xoxb-… (docs/slack.md).
    slack_bot_token: SecretStr | None = Field(default=None, validation_alias=_env("SLACK_BOT_TOKEN"))
    # Checks Slack's HTTP requests (HTTP mode).
    slack_signing_secret: SecretStr | None = Field(
        default=None, validation_alias=_env("SLACK_SIGNING_SECRET")
    )
    # An app-level token, xapp-…: Socket Mode instead of HTTP.
    slack_app_token: SecretStr | None = Field(default=None, validation_alias=_env("SLACK_APP_TOKEN"))
    # The Slack Web API base URL (tests point it at a local server).
    slack_api_url: str = Field(default="https://slack.com/api/", validation_alias=_env("SLACK_API_URL"))
    # The bot's token (docs/discord.md).
    discord_bot_token: SecretStr | None = Field(default=None, validation_alias=_env("DISCORD_BOT_TOKEN"))
    # The Discord REST base URL (tests point it at a local server).
    discord_api_url: str = Field(
        default="https://discord.com/api/v10", validation_alias=_env("DISCORD_API_URL")
    )
    # Who may refresh and see status, e.g. slack:U123,discord:456.
    admins: str = Field(default="", validation_alias=_env("CODEBOT_ADMINS"))
    # --- chat limits (shared by the Slack and Discord adapters) ---------------------------------
    rate_limit_questions: int = Field(default=5, ge=1)  # questions one user may ask per window
    rate_limit_window_seconds: float = Field(default=60.0, gt=0)  # the window of rate_limit_questions
    # Questions waiting in the queue beyond which new ones are turned away with "try later".
    queue_max_depth: int = Field(default=200, ge=1)
    # Threads the Slack adapter runs its listeners on (check, dedupe, enqueue: never the model); in
    # HTTP mode, in its intake process (bot/slack/intake_process.py).
    slack_listener_threads: int = Field(default=16, ge=1, le=256)
    # Slack HTTP mode: the niceness of the intake process (bot/slack/intake_process.py), so that
    # when the CPU is short the HTTP process's acks go first (Slack retries an ack later than 3 s;
    # an intake a few ms late only delays the 👀). 0: the same priority as the HTTP process.
    slack_intake_niceness: int = Field(default=10, ge=0, le=19)
    # Slack HTTP mode: the address `codebot slack` listens on (its port: `--port`). Slack reaches it
    # through a TLS reverse proxy (docs/slack.md); 0.0.0.0 to listen on every interface.
    slack_http_host: str = "127.0.0.1"
    # Slack HTTP mode (bot/slack/http_server.py): connections held at once; beyond, the longest idle are
    # closed (a request in flight never is). Also the acked events that may wait for the intake process.
    slack_http_max_connections: int = Field(default=1000, ge=1)
    # Slack HTTP mode: the time a request has to arrive whole (a slow or silent sender is dropped).
    slack_http_request_seconds: float = Field(default=10.0, gt=0)
    # Slack HTTP mode: an idle keep-alive connection is closed after this long.
    slack_http_idle_seconds: float = Field(default=5.0, gt=0)
    # Slack HTTP mode: threads running bolt for slash commands and clicks (events are acked on the event
    # loop; listeners have their own threads).
    slack_http_dispatch_threads: int = Field(default=32, ge=1, le=256)
    # --- Slack streaming (docs/slack.md, "Streaming") -------------------------------------------
    # Stream answers with chat.startStream/appendStream/stopStream, tool calls as task cards;
    # false: the placeholder edited with progress, then the answer (as before streaming).
    slack_streaming: bool = True
    # Streamed text is sent at most this often per answer (chat.appendStream is Tier 4, shared by
    # every answer of a workspace); what arrives meanwhile goes in the next call.
    slack_stream_interval_seconds: float = Field(default=0.5, ge=0)
    # Text streamed into one message at most (Slack takes 12,000 per call); a longer answer is
    # finished by replacing the stream with the answer's messages.
    slack_stream_max_chars: int = Field(default=11_000, ge=100, le=12_000)
    # A workspace (or channel) that refused the streaming methods is answered without them this long.
    slack_stream_refusal_memory_seconds: float = Field(default=86400.0, gt=0)
    # --- Discord adapter and sink ---------------------------------------------------------------
    # Application commands go to this guild only (appear at once; for development); unset: global.
    discord_command_guild: int | None = None
    discord_sync_commands: bool = True  # push /codebot to Discord at start (bulk overwrite)
    # The privileged Message Content intent: needed for follow-ups in a thread without a mention.
    discord_message_content_intent: bool = True
    # Inactivity after which Discord archives the answer thread: 60, 1440, 4320 or 10080.
    discord_thread_archive_minutes: int = 1440
    # A 429 asking the worker to wait longer than this raises instead of sleeping (>= 30).
    discord_max_ratelimit_wait_seconds: float = Field(default=60.0, ge=30)
    # Show the answer as it is written by editing the progress message; false: progress lines only.
    discord_live_edits: bool = True
    # At most one edit of that message per this many seconds (Discord limits edits per message).
    discord_edit_interval_seconds: float = Field(default=1.5, ge=0)
    # A tool still running after this long is named in that message ("reading `retry.py`…");
    # quicker ones show only as typing, so they never spend the edit the answer's first text needs.
    discord_step_line_after_seconds: float = Field(default=1.0, ge=0)
