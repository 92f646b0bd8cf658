"""Process settings: read once in each process's main() and passed down, never at import time.

Every limit is a named setting whose name carries its unit. Environment variables use the
names of ../shared/CONTRACT.md (REDIS_URL, OPENAI_*, SLACK_*, DISCORD_*) or `CODEBOT_<FIELD>`
for everything of our own; a `.env` file in the working directory is read too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from config.errors import ConfigError

# The packaged whitelist, used when the default relative path does not exist in the working
# directory (e.g. `codebot` run from elsewhere after `pip install -e`).
PACKAGED_REPOS_FILE = Path(__file__).resolve().parent / "repos.toml"
DEFAULT_REPOS_FILE = Path("config/repos.toml")

SECRET_FIELDS = (
    "openai_api_key",
    "slack_bot_token",
    "slack_signing_secret",
    "slack_app_token",
    "discord_bot_token",
    "mcp_token",
    "redis_sentinel_password",
    "redis_password",
    "web_token",
    "web_admin_token",
)
DEFAULT_SECRET_FILE_GLOBS = (
    ".env",
    ".env.*",
    "*.env",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".envrc",
    "env.local",
    ".flaskenv",
    ".netrc",
    "_netrc",
    "netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".aws/credentials",
    ".docker/config.json",
    ".kube/config",
    ".htpasswd",
    ".git-credentials",
    "credentials.json",
    "*.kdbx",
)


def _env(name: str) -> Any:
    """An alias for a variable named by the contract rather than `CODEBOT_<FIELD>`."""
    return AliasChoices(name)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CODEBOT_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
        frozen=True,
    )

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
    # refreshes (`refresh_minutes` in repos.toml) and for a newer commit another machine fetched.
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

    # --- mirrors -----------------------------------------------------------------------------
    git_timeout_seconds: float = Field(default=600.0, gt=0)  # one git fetch or clone
    # Commits of history a mirror keeps back from its branch's tip, for repos whose repos.toml
    # entry sets no `history_depth` (what log, blame, show and diff can see); 0: all of it.
    history_depth: int = Field(default=1000, ge=0)
    # No mirror keeps more commits than this, `history_depth = "all"` included; 0: no cap.
    history_max_depth: int = Field(default=100_000, ge=0)
    # How long a sync waits for another refresh of the same repo before giving up.
    sync_lock_wait_seconds: float = Field(default=1800.0, gt=0)
    # `codebot repos sync` refreshes this many repos at once (each has its own lock).
    sync_max_parallel_repos: int = Field(default=4, ge=1, le=32)
    # Free space on the data dir's disk that fetches and snapshots never use: a fetch or a
    # snapshot that would go under it fails with the reason (the last good snapshot keeps serving).
    disk_reserve_bytes: int = Field(default=1 << 30, ge=0)
    # Files in one commit, checked from `git ls-tree` before anything is extracted; over it the
    # sync fails with the reason and the last good snapshot keeps serving.
    snapshot_max_files: int = Field(default=250_000, ge=1)
    # Bytes in one commit (git may compress a huge file into a tiny repo), checked the same way.
    snapshot_max_bytes: int = Field(default=4 << 30, ge=1)

    # --- the processed blob store (worker/repos/blobstore.py) ----------------------------------
    # A file larger than this is not processed: it is listed, with a notice instead of content.
    blob_max_bytes: int = Field(default=10_000_000, ge=1)
    # Each stage of processing one blob (redact and classify; parse) in this time, else the blob
    # is withheld with the reason, never shown raw.
    blob_timeout_seconds: float = Field(default=20.0, gt=0)
    # Address space of one blob processor process: a blob that needs more is withheld (0: no limit).
    blob_memory_bytes: int = Field(default=2 << 30, ge=0)
    blob_workers: int = Field(default=0, ge=0, le=64)  # blob processor processes per sync; 0: one per CPU

    # --- tool limits -------------------------------------------------------------------------
    search_max_results: int = Field(default=50, ge=1, le=1000)  # matches one search shows
    # After the shown matches, keep counting up to this many so the model hears "N more".
    search_count_limit: int = Field(default=1000, ge=1)
    search_timeout_seconds: float = Field(default=10.0, gt=0)  # one search
    search_max_file_bytes: int = Field(default=2_000_000, ge=1)  # larger files are not searched
    search_max_line_chars: int = Field(default=300, ge=20)  # a matched line is cut at this length
    read_max_lines: int = Field(default=400, ge=1)  # lines one read_file shows
    read_max_chars: int = Field(default=24_000, ge=200)  # characters one read_file shows
    read_max_line_chars: int = Field(default=500, ge=20)  # a line read_file shows is cut at this length
    list_max_entries: int = Field(default=200, ge=1)  # entries one list_files shows
    overview_readme_chars: int = Field(default=1500, ge=0)  # the README opening repo_overview shows
    tool_output_max_chars: int = Field(default=30_000, ge=500)  # any tool result is cut at this length
    pattern_max_chars: int = Field(default=1000, ge=1)  # a search pattern longer than this is refused
    path_max_chars: int = Field(default=1024, ge=16)  # longer tool paths are refused
    # read_file keeps smaller files (redacted) in the per-question cache; larger ones are streamed.
    read_cache_max_file_bytes: int = Field(default=2_000_000, ge=1)
    # list_files with a glob, and "did you mean" suggestions, walk at most this many entries of a
    # snapshot built without a path manifest (by an earlier release); others look paths up.
    list_walk_max_entries: int = Field(default=100_000, ge=100)
    # Files that never enter a snapshot, nor are listed, read or searched (JSON list; replaces the
    # defaults, so repeat those you keep; a glob with a "/" matches the end of a path).
    secret_file_globs: tuple[str, ...] = DEFAULT_SECRET_FILE_GLOBS

    # --- history tools: log, blame, show, diff over the mirrors' history -------------------------
    history_timeout_seconds: float = Field(default=30.0, gt=0)  # one git command of a history tool
    # Bytes one git command of a history tool may print; beyond it git is stopped and the rest cut.
    history_output_max_bytes: int = Field(default=16_000_000, ge=10_000)
    history_log_max_commits: int = Field(default=100, ge=1, le=10_000)  # most commits one log lists
    # Commits a log query looks at, newest first: every one is tested on its redacted message and
    # processed changes (never git's raw --grep/-S/-G), so a query is no oracle on a secret.
    history_log_query_max_commits: int = Field(default=2000, ge=1, le=100_000)
    # A file version larger than this is not diffed by show or diff (a notice says so).
    history_diff_max_file_bytes: int = Field(default=1_000_000, ge=1)
    history_stat_max_files: int = Field(default=100, ge=1)  # files listed in the stat of show or diff
    history_message_max_lines: int = Field(default=80, ge=1)  # lines of a commit message show prints
    # Authors are shown by name only; true: with their e-mail addresses too.
    history_show_emails: bool = False

    # --- code navigation: the symbol index built with each snapshot -----------------------------
    # Files larger than this (minified bundles, generated code) are left out of the index.
    symbols_max_file_bytes: int = Field(default=1_000_000, ge=1)
    # Files indexed per snapshot (in path order); beyond this the index is partial and says so.
    symbols_max_files: int = Field(default=50_000, ge=1)
    definition_max_results: int = Field(default=10, ge=1, le=200)  # definitions shown per call
    definition_preview_lines: int = Field(default=8, ge=1, le=200)  # lines shown of each definition
    references_max_results: int = Field(default=50, ge=1, le=1000)  # reference lines shown per call

    # --- MCP server (`codebot mcp`) ---------------------------------------------------------------
    # The bearer token HTTP clients must send; `codebot mcp --http` refuses to start without one.
    mcp_token: SecretStr | None = None
    # Repos the MCP tools may read (JSON list). Empty: every repo over stdio; over HTTP, every repo
    # without a `channels` allow-list (a channel-restricted repo must be named here to be served).
    mcp_repos: tuple[str, ...] = ()
    mcp_http_host: str = "127.0.0.1"  # where `codebot mcp --http` listens
    # Host names clients reach `codebot mcp --http` by, behind a reverse proxy (JSON list, e.g.
    # '["codebot.example.com"]'): the MCP SDK refuses other Host headers (421) to stop DNS
    # rebinding. Local names are always allowed; '["*"]' turns the check off.
    mcp_allowed_hosts: tuple[str, ...] = ()

    # --- the operators' web console (`codebot web`, docs/operations.md) ---------------------------
    web_host: str = "127.0.0.1"  # where `codebot web` listens (`--host`); a reverse proxy is its front
    web_port: int = Field(default=8780, ge=0, le=65535)  # its port (`--port`)
    # The token an operator logs in with; `codebot web` refuses to start without it or a proxy header.
    web_token: SecretStr | None = None
    # A second token whose holders also see the questions' texts (the console's admins).
    web_admin_token: SecretStr | None = None
    # Behind a reverse proxy that authenticates people: the header carrying the user's name (e.g.
    # X-Forwarded-User). Requests with it are let in as that user, so the console must be reachable
    # only through the proxy (keep web_host 127.0.0.1). Empty: tokens only.
    web_proxy_user_header: str = ""
    # Users named by that header who see the questions' texts (JSON list); everyone else sees
    # the facts of each question (repos, outcome, tools, time), never its words.
    web_admins: tuple[str, ...] = ()

    @field_validator("data_dir", "repos_file", mode="before")
    @classmethod
    def _blank_path_is_default(cls, value: object, info: ValidationInfo) -> object:
        # `CODEBOT_DATA_DIR=` would otherwise be Path("."): everything written into the cwd.
        if isinstance(value, str) and not value.strip():
            return cls.model_fields[str(info.field_name)].default
        return value

    @field_validator("data_dir", "repos_file", mode="after")
    @classmethod
    def _expand_user(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("redis_url", mode="after")
    @classmethod
    def _redis_scheme(cls, value: str | None) -> str | None:
        if value and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return value

    @field_validator("openai_base_url", "slack_api_url", "discord_api_url", mode="after")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        # "localhost:8000" parses as scheme "localhost": every question would fail later instead
        if value and not re.match(r"https?://[^/\s]", value.strip()):
            raise ValueError("must be an http:// or https:// URL (e.g. http://localhost:8000/v1)")
        return value.strip() if value else value

    @field_validator("admins", mode="after")
    @classmethod
    def _admin_entries(cls, value: str) -> str:
        for entry in (part.strip() for part in value.split(",")):
            platform, _, user = entry.partition(":")
            if entry and (platform not in ("slack", "discord") or not re.fullmatch(r"[A-Za-z0-9]+", user)):
                raise ValueError(
                    f"{entry!r} is not platform:id (slack:U0123ABCD or discord:123456789012345678, comma-separated)"
                )
        return value

    @field_validator("redis_sentinels", mode="after")
    @classmethod
    def _sentinel_addresses(cls, value: str, info: ValidationInfo) -> str:
        if not value.strip():
            return ""
        if info.data.get("redis_url"):
            raise ValueError("set REDIS_URL or REDIS_SENTINELS, not both")
        for address in value.split(","):
            host, _, port = address.strip().rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{address.strip()!r} is not host:port (e.g. 10.0.0.5:26379,10.0.0.6:26379)")
        return ",".join(address.strip() for address in value.split(","))

    @field_validator("discord_command_guild", mode="before")
    @classmethod
    def _blank_guild_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("discord_thread_archive_minutes", mode="after")
    @classmethod
    def _archive_choice(cls, value: int) -> int:
        if value not in (60, 1440, 4320, 10080):
            raise ValueError("must be one of 60, 1440, 4320, 10080 (minutes)")
        return value

    @field_validator("redis_url", "openai_base_url", mode="after")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        return value or None

    # Tokens and keys are SecretStr: shown as ********** in any repr, log or error; each use
    # site calls get_secret_value().
    @field_validator(*SECRET_FIELDS, mode="before")
    @classmethod
    def _blank_secret_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def sentinel_addresses(self) -> list[tuple[str, int]]:
        """REDIS_SENTINELS as (host, port) pairs; empty when Sentinel is not used."""
        pairs = [address.rpartition(":") for address in self.redis_sentinels.split(",") if address]
        return [(host.strip("[]"), int(port)) for host, _, port in pairs]

    @property
    def resolved_repos_file(self) -> Path:
        if self.repos_file == DEFAULT_REPOS_FILE and not self.repos_file.exists():
            return PACKAGED_REPOS_FILE
        return self.repos_file


def _variable_name(field: str) -> str:
    for aliased in Settings.model_fields.values():  # an error on an aliased field is located by its alias
        if isinstance(aliased.validation_alias, AliasChoices) and field in aliased.validation_alias.choices:
            return field
    info = Settings.model_fields.get(field)
    alias = info.validation_alias if info else None
    if isinstance(alias, AliasChoices):
        first = alias.choices[0]
        return first if isinstance(first, str) else field
    return f"CODEBOT_{field.upper()}"


def load_settings(env_file: str | Path | None = ".env", **overrides: Any) -> Settings:
    """Build the settings, or raise ConfigError naming the variable at fault and the fix."""
    try:
        return Settings(_env_file=env_file, **overrides)  # type: ignore[call-arg]
    except SettingsError as exc:  # a list-valued setting that is not JSON
        match = re.search(r'field "(\w+)"', str(exc))
        name = _variable_name(match.group(1)) if match else "a setting"
        raise ConfigError(
            f'{name}: not a JSON list (e.g. \'["a", "b"]\') — fix it in the environment or .env'
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{env_file}: not UTF-8 text — save it as UTF-8") from None
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else "?"
        variable = _variable_name(field)
        got = error.get("input")
        # never echo a value that may carry a credential (a password in REDIS_URL, a token)
        secret = variable == "REDIS_URL" or variable.endswith(("TOKEN", "SECRET", "KEY", "PASSWORD"))
        shown = (
            f" (got {got!r})"
            if isinstance(got, str | int | float) and len(str(got)) < 80 and not secret
            else ""
        )
        raise ConfigError(
            f"{variable}: {error['msg'].removeprefix('Value error, ')}{shown}"
            " — fix it in the environment or .env"
        ) from None
