"""Who may see the console, and whether they see the questions' texts.

Three ways in, each configured (docs/operations.md, "The web console"):
- `CODEBOT_WEB_TOKEN`: an operator logs in with it (a form, or `Authorization: Bearer`); they see
  every page, but a question only by its facts, never its words;
- `CODEBOT_WEB_ADMIN_TOKEN`: the same, and the questions' texts too;
- `CODEBOT_WEB_PROXY_USER_HEADER`: a reverse proxy that authenticated the user names them in this
  header; users listed in `CODEBOT_WEB_ADMINS` see the texts.

The session cookie is an HMAC of the token, never the token: changing a token ends its sessions.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from config.errors import ConfigError
from config.settings import Settings

COOKIE = "codebot_console"
_SESSION_CONTEXT = b"codebot web console session v1"


@dataclass(frozen=True)
class Viewer:
    name: str
    sees_questions: bool


def _session_of(token: str) -> str:
    return hmac.new(token.encode(), _SESSION_CONTEXT, hashlib.sha256).hexdigest()


class Gate:
    def __init__(self, settings: Settings) -> None:
        self.tokens: list[tuple[str, Viewer]] = []
        if settings.web_admin_token is not None:
            self.tokens.append((settings.web_admin_token.get_secret_value(), Viewer("admin token", True)))
        if settings.web_token is not None:
            self.tokens.append((settings.web_token.get_secret_value(), Viewer("operator token", False)))
        self.proxy_header = settings.web_proxy_user_header.strip().lower()
        self.admins = frozenset(settings.web_admins)
        if not self.tokens and not self.proxy_header:
            raise ConfigError(
                "CODEBOT_WEB_TOKEN: not set — the console needs a token (e.g. `openssl rand -hex 32`) "
                "or CODEBOT_WEB_PROXY_USER_HEADER behind an authenticating proxy"
            )

    def by_token(self, given: str) -> Viewer | None:
        for token, viewer in self.tokens:
            if given and hmac.compare_digest(given.encode(), token.encode()):
                return viewer
        return None

    def session_for(self, given: str) -> str | None:
        """The cookie value for a correct token."""
        return _session_of(given) if self.by_token(given) else None

    def viewer(self, headers: dict[str, str], cookie: str) -> Viewer | None:
        """The viewer a request comes from, or None: not let in."""
        if self.proxy_header and headers.get(self.proxy_header):
            user = headers[self.proxy_header]
            return Viewer(user, user in self.admins)
        bearer = headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            return self.by_token(bearer[7:].strip())
        for token, viewer in self.tokens:
            if cookie and hmac.compare_digest(cookie.encode(), _session_of(token).encode()):
                return viewer
        return None
