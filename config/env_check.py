"""Unknown setting names: a typo (`CODEBOT_MODLE`, `SLACK_TOKEN`) gets one warning line, with a guess.

pydantic-settings ignores a variable it has no field for, so a misspelt name used to pass in
silence and the default applied. Every `CODEBOT_*`, `SLACK_*`, `DISCORD_*` and `OPENAI_*` name in
the environment and in `.env` is checked against the settings' own names and the names the
libraries we use read themselves (the openai SDK, slack-bolt) or our tests and benches read.
A warning, not a refusal: a name another program on the same machine reads is not our error.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import AliasChoices
from pydantic_settings import BaseSettings

PREFIXES = ("CODEBOT_", "SLACK_", "DISCORD_", "OPENAI_")
# Read by a library or a helper of ours, not by Settings.
READ_ELSEWHERE = frozenset(
    {
        # the openai SDK
        "OPENAI_ORG_ID",
        "OPENAI_PROJECT_ID",
        "OPENAI_LOG",
        "OPENAI_WEBHOOK_SECRET",
        "OPENAI_ADMIN_KEY",
        "OPENAI_API_VERSION",
        "OPENAI_API_TYPE",
        "OPENAI_CUSTOM_HEADERS",
        # slack-bolt (OAuth installs, which codebot does not use, but a shared .env may hold)
        "SLACK_CLIENT_ID",
        "SLACK_CLIENT_SECRET",
        "SLACK_SCOPES",
        "SLACK_USER_SCOPES",
        "SLACK_INSTALL_PATH",
        "SLACK_REDIRECT_URI",
        "SLACK_REDIRECT_URI_PATH",
        "SLACK_VERIFICATION_TOKEN",
        # tests and benches: a Python with llama-cpp-python's server (tests/support/llama_server.py)
        "CODEBOT_LLAMA_PYTHON",
    }
)


def known_names(settings_class: type[BaseSettings]) -> set[str]:
    """Every variable name the settings read: CODEBOT_<FIELD>, or the field's contract alias."""
    prefix = str(settings_class.model_config.get("env_prefix", ""))
    names = set(READ_ELSEWHERE)
    for field_name, info in settings_class.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(choice for choice in alias.choices if isinstance(choice, str))
        else:
            names.add(f"{prefix}{field_name}".upper())
    return names


def dotenv_names(path: Path) -> list[str]:
    """The names a .env file sets (unreadable or missing: none; load_settings reports those)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    names = []
    for line in text.splitlines():
        line = line.strip().removeprefix("export ").strip()
        if line and not line.startswith("#") and "=" in line:
            names.append(line.split("=", 1)[0].strip())
    return names


def unknown_name_warnings(known: set[str], names: Iterable[tuple[str, str]]) -> list[str]:
    """One line per unknown (name, where) pair of ours, with the closest known name."""
    lines: list[str] = []
    seen: set[str] = set()
    for name, where in names:
        upper = name.upper()
        if not upper.startswith(PREFIXES) or upper in known or upper in seen:
            continue
        seen.add(upper)
        guess = difflib.get_close_matches(upper, sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {guess[0]}?" if guess else ""
        lines.append(f"codebot: warning: {name} (in {where}) is not a codebot setting and is ignored{hint}")
    return lines


def check_names(
    settings_class: type[BaseSettings], environ: Mapping[str, str] | None = None, env_file: Path | None = None
) -> list[str]:
    """The warnings for the process's environment and its .env file."""
    environ = os.environ if environ is None else environ
    pairs = [(name, "the environment") for name in environ]
    if env_file is not None:
        pairs += [(name, str(env_file)) for name in dotenv_names(env_file)]
    return unknown_name_warnings(known_names(settings_class), pairs)
