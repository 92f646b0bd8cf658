"""The repository whitelist (`config/repos.toml`): what exists for users, the model and the tools.

Errors name the file and line of the offending entry and say how to fix it. A `url` may use
`${VAR}` to pull a credential from the environment (e.g. a token for a private repo); the
expanded URL is only ever handed to git, and `display_url` hides any credentials in it.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from config.errors import ConfigError

NAME_PATTERN = re.compile(r"^[a-z0-9._-]{1,64}$")
CHANNEL_PATTERN = re.compile(r"^(slack|discord):[A-Za-z0-9_-]+$")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ONLY_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
_KNOWN_KEYS = {
    "name", "url", "branch", "web_url", "forge", "description", "channels", "refresh_minutes", "history_depth",
    "webhook_secret",
}  # fmt: skip
# The forges whose link shapes we know (worker/agent/links.py); `forge` in repos.toml names one.
FORGES = ("github", "gitlab", "bitbucket", "gitea", "forgejo", "azure")
# Hosts whose forge needs no `forge` key.
_FORGE_HOSTS = {
    "github.com": "github",
    "gitlab.com": "gitlab",
    "bitbucket.org": "bitbucket",
    "codeberg.org": "forgejo",
    "gitea.com": "gitea",
    "dev.azure.com": "azure",
    "ssh.dev.azure.com": "azure",
}
ALL_HISTORY = 0  # history_depth = "all"


@dataclass(frozen=True)
class RepoSpec:
    name: str
    url: str  # what git fetches from: credentials expanded, local paths made absolute
    display_url: str  # the same without credentials, safe to print
    branch: str | None = None  # None: the remote's default branch
    web_url: str | None = None
    description: str = ""
    channels: tuple[str, ...] | None = None  # None: every channel
    refresh_minutes: int | None = None
    line: int = 0  # where the entry starts in the repos file, for messages
    history_depth: int | None = None  # commits the mirror keeps; None: the setting; 0 (ALL_HISTORY): all
    declared_forge: str | None = None  # the `forge` key; None: inferred from the web URL's host
    # `webhook_secret = "${VAR}"`: the environment variable holding this repo's webhook secret
    # (read by `codebot webhooks` alone, so no other process needs it set); None: the forge's setting.
    webhook_secret_variable: str | None = None

    @property
    def forge(self) -> str | None:
        """One of FORGES, or None for an unknown forge (links then take GitHub's shapes)."""
        if self.declared_forge:
            return self.declared_forge
        return forge_of_host(urlsplit(self.web_url).hostname or "") if self.web_url else None

    def allowed_in(self, channel_key: str) -> bool:
        """channel_key is `platform:id`; an omitted allow-list means every channel."""
        return self.channels is None or channel_key in self.channels


def strip_credentials(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme and "@" in parts.netloc:
        host = parts.netloc.rsplit("@", 1)[1]
        return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return url


def forge_of_host(host: str) -> str | None:
    host = host.lower()
    if host.endswith(".visualstudio.com"):
        return "azure"
    return _FORGE_HOSTS.get(host)


def infer_web_url(url: str, forge: str | None = None) -> str | None:
    """https://github.com/o/r.git, git@github.com:o/r.git, ssh://git@github.com/o/r -> https URL.

    Known hosts only, unless `forge` is declared: then any host (a self-hosted forge), assuming
    its web pages are served over https on the same host (set web_url when they are not)."""
    scp = re.match(r"^[\w.-]+@([\w.-]+):(.+)$", url)
    if scp:
        host, path = scp.group(1), scp.group(2)
    else:
        parts = urlsplit(url)
        if parts.scheme not in {"http", "https", "ssh", "git"}:
            return None
        host, path = parts.hostname or "", parts.path
    forge = forge or forge_of_host(host)
    if forge is None or not host:
        return None
    path = path.strip("/").removesuffix(".git")
    if forge == "azure" and host.startswith("ssh."):
        # git@ssh.dev.azure.com:v3/org/project/repo -> https://dev.azure.com/org/project/_git/repo
        segments = path.split("/")
        if len(segments) != 4 or segments[0] != "v3":
            return None
        return f"https://{host.removeprefix('ssh.')}/{segments[1]}/{segments[2]}/_git/{segments[3]}"
    return f"https://{host}/{path}" if path else None


_REPO_HEADER = re.compile(r"^\s*\[\[\s*repo\s*\]\]")


def _entry_lines(text: str) -> list[int]:
    """1-based line numbers of each `[[repo]]` (or `[[ repo ]]`) header, in order."""
    return [i + 1 for i, line in enumerate(text.splitlines()) if _REPO_HEADER.match(line)]


def _expand_env(value: str, where: str) -> str:
    def sub(match: re.Match[str]) -> str:
        var = match.group(1)
        if var not in os.environ:
            raise ConfigError(f"{where}: url uses ${{{var}}} but {var} is not set — export it or fix the url")
        return os.environ[var]

    return _ENV_REF.sub(sub, value)


def _resolve_url(raw: str, base: Path, where: str) -> tuple[str, str]:
    """Return (url for git, url for display)."""
    display = strip_credentials(raw)
    url = _expand_env(raw, where)
    looks_remote = "://" in url or re.match(r"^[\w.-]+@[\w.-]+:", url)
    if not looks_remote:
        path = (base / url).resolve() if not Path(url).is_absolute() else Path(url)
        return str(path), str(path)
    return url, display


def _parse_entry(raw: object, where: str, base: Path, line: int) -> RepoSpec:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: each [[repo]] must be a table")
    unknown = set(raw) - _KNOWN_KEYS
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {sorted(unknown)[0]!r} — allowed: {', '.join(sorted(_KNOWN_KEYS))}"
        )
    name = raw.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ConfigError(f"{where}: name {name!r} must be 1-64 characters of a-z 0-9 . _ -")
    url = raw.get("url")
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"{where}: repo {name!r} needs a url (a git URL or a local path)")
    git_url, display = _resolve_url(url.strip(), base, where)
    branch = raw.get("branch")
    if branch is not None and (not isinstance(branch, str) or not re.match(r"^[\w./-]+$", branch)):
        raise ConfigError(f"{where}: branch {branch!r} of repo {name!r} is not a valid branch name")
    web_url = raw.get("web_url")
    if web_url is not None and (
        not isinstance(web_url, str) or not web_url.startswith(("http://", "https://"))
    ):
        raise ConfigError(f"{where}: web_url of repo {name!r} must be an http(s) URL")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(f"{where}: description of repo {name!r} must be a string")
    channels = _channels(raw.get("channels"), name, where)
    refresh = raw.get("refresh_minutes")
    if refresh is not None and (not isinstance(refresh, int) or isinstance(refresh, bool) or refresh < 1):
        raise ConfigError(f"{where}: refresh_minutes of repo {name!r} must be a whole number ≥ 1")
    forge = _forge(raw.get("forge"), name, where)
    return RepoSpec(
        name=name,
        url=git_url,
        display_url=display,
        branch=branch,
        web_url=(web_url.rstrip("/") if web_url else infer_web_url(strip_credentials(git_url), forge)),
        description=description.strip(),
        channels=channels,
        refresh_minutes=refresh,
        line=line,
        history_depth=_history_depth(raw.get("history_depth"), name, where),
        declared_forge=forge,
        webhook_secret_variable=_secret_variable(raw.get("webhook_secret"), name, where),
    )


def _channels(value: object, name: str, where: str) -> tuple[str, ...] | None:
    """The channels allow-list, each `platform:id`; None (every channel) when it is left out."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
        raise ConfigError(f"{where}: channels of repo {name!r} must be a list of strings")
    bad = [c for c in value if not CHANNEL_PATTERN.match(c)]
    if bad:
        raise ConfigError(f"{where}: channel {bad[0]!r} must look like 'slack:C0123' or 'discord:98765'")
    return tuple(value)


def _forge(value: object, name: str, where: str) -> str | None:
    """The declared forge, lower-cased; None when left out (it is inferred from the host)."""
    if value is not None and (not isinstance(value, str) or value.lower() not in FORGES):
        raise ConfigError(f"{where}: forge {value!r} of repo {name!r} must be one of: {', '.join(FORGES)}")
    return value.lower() if value else None


def _secret_variable(value: object, name: str, where: str) -> str | None:
    """`webhook_secret = "${VAR}"` -> "VAR": a secret never sits in the repos file itself."""
    if value is None:
        return None
    match = _ONLY_ENV_REF.match(value) if isinstance(value, str) else None
    if match is None:
        raise ConfigError(
            f'{where}: webhook_secret of repo {name!r} must name an environment variable, e.g. "${{PAYMENTS_WEBHOOK_SECRET}}"'
            " (the secret itself never goes in the repos file)"
        )
    return match.group(1)


def _history_depth(value: object, name: str, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() == "all":
        return ALL_HISTORY
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise ConfigError(
        f'{where}: history_depth of repo {name!r} must be a number of commits ≥ 1 or "all" (got {value!r})'
    )


@dataclass(frozen=True)
class Whitelist:
    repos: tuple[RepoSpec, ...]
    path: Path
    by_name: dict[str, RepoSpec] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        self.by_name.update({r.name: r for r in self.repos})

    def get(self, name: str) -> RepoSpec | None:
        return self.by_name.get(name)

    def names(self) -> list[str]:
        return [r.name for r in self.repos]

    def allowed_in(self, channel_key: str) -> list[RepoSpec]:
        return [r for r in self.repos if r.allowed_in(channel_key)]


def _line_at(path: Path, offset: int) -> int:
    """The 1-based line of byte `offset` in the file at `path`."""
    try:
        return path.read_bytes()[:offset].count(b"\n") + 1
    except OSError:
        return 1


def load_whitelist(path: Path) -> Whitelist:
    """Read and validate the repos file, or raise ConfigError naming file:line and the fix."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: repos file not found — copy config/repos.example.toml there or set CODEBOT_REPOS_FILE"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the repos file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        line = _line_at(path, exc.start)
        raise ConfigError(f"{path}:{line}: not UTF-8 text — save the repos file as UTF-8") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    unknown = set(data) - {"repo"}
    if unknown:
        raise ConfigError(
            f"{path}: unknown top-level key {sorted(unknown)[0]!r} — entries go in [[repo]] tables"
        )
    entries = data.get("repo", [])
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: 'repo' must be an array of tables written as [[repo]]")
    lines = _entry_lines(text)
    # `[[repo]]` headers name each entry's line; entries written as an inline array
    # (`repo = [{...}, {...}]`) have none, and are named by their position instead.
    by_header = len(lines) == len(entries)
    repos: list[RepoSpec] = []
    seen: dict[str, str] = {}
    for index, raw in enumerate(entries):
        line = lines[index] if by_header else 0
        where = f"{path}:{line}" if by_header else f"{path}: repo entry {index + 1}"
        repo = _parse_entry(raw, where, path.resolve().parent, line)
        if repo.name in seen:
            raise ConfigError(f"{where}: repo name {repo.name!r} is already used at {seen[repo.name]}")
        seen[repo.name] = f"line {line}" if by_header else f"entry {index + 1}"
        repos.append(repo)
    return Whitelist(repos=tuple(repos), path=path)
