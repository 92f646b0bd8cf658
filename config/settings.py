"""Process settings: read once in each process's main() and passed down, never at import time.

Every limit is a named setting whose name carries its unit. Environment variables use the
names the README and docs/configuration.md give (REDIS_URL, OPENAI_*, SLACK_*, DISCORD_*), or
`CODEBOT_<FIELD>` for everything of our own; a `.env` file in the working directory is read too.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import SettingsConfigDict, SettingsError

from config.errors import ConfigError
from config.settings_fields import DEFAULT_REPOS_FILE, PACKAGED_REPOS_FILE, ChatSettings

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
    "webhooks_github_secret",
    "webhooks_gitlab_secret",
    "webhooks_gitea_secret",
    "webhooks_bitbucket_secret",
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


class Settings(ChatSettings):
    """Every setting: the first sections' (config/settings_fields.py), then the repos', the
    tools', MCP's, the web console's and the webhooks' below."""

    model_config = SettingsConfigDict(
        env_prefix="CODEBOT_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
        frozen=True,
    )

    # --- mirrors -----------------------------------------------------------------------------
    git_timeout_seconds: float = Field(default=600.0, gt=0)  # one git fetch or clone
    # Commits of history a mirror keeps back from its branch's tip, for repos whose repos.toml
    # entry sets no `history_depth` (what log, blame, show and diff can see); 0: all of it.
    history_depth: int = Field(default=1000, ge=0)
    # No mirror keeps more commits than this, `history_depth = "all"` included; 0: no cap.
    history_max_depth: int = Field(default=100_000, ge=0)
    # Files git pairs by content per side of one commit when it looks for renames with an edit
    # (git's -l: at most this squared candidate pairs; a commit with 2,000 deleted and 2,000 added
    # 4 kB files takes 5.5 s). Past it codebot pairs the commit's secret files by content itself
    # (docs/security.md#rename-pairing).
    lineage_rename_limit: int = Field(default=2000, ge=1, le=32767)
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
    # One find_definition or find_references over every repo in scope (the answer says how far it got).
    navigation_timeout_seconds: float = Field(default=10.0, gt=0)
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
    # The token an operator logs in with, at least 32 characters; `codebot web` refuses to start
    # without it or a proxy header.
    web_token: SecretStr | None = None
    # A second token (at least 32 characters) whose holders also see the questions' texts.
    web_admin_token: SecretStr | None = None
    # Behind a reverse proxy that authenticates people: the header carrying the user's name (e.g.
    # X-Forwarded-User). A request with it from one of web_trusted_proxies is let in as that
    # user (a Bearer token, when given, decides instead). Empty: tokens only.
    web_proxy_user_header: str = ""
    # Users named by that header who see the questions' texts (JSON list); everyone else sees
    # the facts of each question (repos, outcome, tools, time), never its words.
    web_admins: tuple[str, ...] = ()
    # The addresses the authenticating proxy connects from (JSON list of IPs or CIDRs, e.g.
    # '["127.0.0.1"]'): the user header counts only on a connection from one of these (the TCP
    # peer, never X-Forwarded-For). With the header set and this empty, `codebot web` refuses to start.
    web_trusted_proxies: tuple[str, ...] = ()
    # Host names the console is reached by, without a port (JSON list, e.g. '["console.example.com"]';
    # '*.example.com' for its subdomains), besides 127.0.0.1, localhost, [::1] and the address it
    # listens on: any other Host header is refused (400), which stops DNS rebinding.
    web_allowed_hosts: tuple[str, ...] = ()
    web_session_seconds: int = Field(default=43_200, ge=60)  # a login lasts this long; logout ends it
    # Failed logins (the form or a wrong Bearer token) from one address in a window; more: 429
    # with Retry-After until the window ends, the right token included.
    web_login_failures_per_address: int = Field(default=5, ge=1)
    # Failed logins from all addresses together in a window; more: 429 for everyone until it ends.
    web_login_failures_total: int = Field(default=100, ge=1)
    web_login_window_seconds: int = Field(default=900, ge=1)  # the window those two count in

    # --- forge webhooks (`codebot webhooks`, docs/webhooks.md) -----------------------------------
    # Where `codebot webhooks` listens (`--host`); forges reach it through a TLS reverse proxy.
    webhooks_host: str = "127.0.0.1"
    webhooks_port: int = Field(default=8790, ge=0, le=65535)  # its port (`--port`)
    # GitHub's webhook secret (X-Hub-Signature-256); a repo's `webhook_secret` in repos.toml
    # replaces it for that repo.
    webhooks_github_secret: SecretStr | None = None
    # GitLab's secret token (X-Gitlab-Token); a repo's `webhook_secret` replaces it for that repo.
    webhooks_gitlab_secret: SecretStr | None = None
    # Gitea's and Forgejo's webhook secret (X-Gitea-Signature, X-Forgejo-Signature).
    webhooks_gitea_secret: SecretStr | None = None
    # Bitbucket Cloud's and Bitbucket Server/Data Center's webhook secret (X-Hub-Signature).
    webhooks_bitbucket_secret: SecretStr | None = None
    # A delivery whose body is larger than this is refused (413) without reading more of it.
    webhooks_max_body_bytes: int = Field(default=5_000_000, ge=1024)
    # A delivery id is remembered this long: the same delivery sent again within it changes nothing.
    webhooks_replay_seconds: float = Field(default=604_800.0, gt=0)
    # Connections held at once; beyond, the longest idle are closed (a request in flight never is).
    webhooks_max_connections: int = Field(default=100, ge=1)
    # The time a delivery has to arrive whole (a slow or silent sender is dropped).
    webhooks_request_seconds: float = Field(default=10.0, gt=0)
    # An idle keep-alive connection is closed after this long.
    webhooks_idle_seconds: float = Field(default=5.0, gt=0)
    # With webhooks set up (a forge's secret above, or a repo's `webhook_secret`), each repo is
    # still polled as a fallback, this rarely: every N minutes (a repo's longer `refresh_minutes`
    # wins), `git ls-remote` first and a fetch only when its tip moved; 0: `refresh_minutes` alone.
    webhooks_poll_minutes: int = Field(default=60, ge=0)

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

    @field_validator("web_trusted_proxies", mode="after")
    @classmethod
    def _ip_networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            try:
                ipaddress.ip_network(entry.strip(), strict=False)
            except ValueError:
                raise ValueError(
                    f"{entry!r} is not an IP address or CIDR (e.g. 127.0.0.1 or 10.0.0.0/8)"
                ) from None
        return tuple(entry.strip() for entry in value)

    @field_validator("web_allowed_hosts", mode="after")
    @classmethod
    def _host_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            if not re.fullmatch(r"(\*\.)?[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]", entry.strip()):
                raise ValueError(
                    f"{entry!r} is not a host name without a port (e.g. console.example.com, *.example.com)"
                )
        return tuple(entry.strip() for entry in value)

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
