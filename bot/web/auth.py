"""Who may see the console, and whether they see the questions' texts.

Three ways in, each configured (docs/operations.md, "The web console"):
- `CODEBOT_WEB_TOKEN`: an operator logs in with it (a form, or `Authorization: Bearer`); they see
  every page, but a question only by its facts, never its words;
- `CODEBOT_WEB_ADMIN_TOKEN`: the same, and the questions' texts too;
- `CODEBOT_WEB_PROXY_USER_HEADER`: a reverse proxy that authenticated the user names them in this
  header; users listed in `CODEBOT_WEB_ADMINS` see the texts. The header is believed only on a
  connection from `CODEBOT_WEB_TRUSTED_PROXIES` (the TCP peer, never X-Forwarded-For: anyone can
  write that), so the console refuses to start with the header and no trusted proxy.

Tokens are at least 32 characters (texts.MIN_TOKEN_CHARS). A login opens a server-side session
(bot/web/sessions.py) that remembers the token's fingerprint (an HMAC, never the token):
changing a token ends its sessions, logging out ends one.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from dataclasses import dataclass

from bot.web import texts
from config.errors import ConfigError
from config.settings import Settings

COOKIE = "codebot_console"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")
ANY_ADDRESS = ("0.0.0.0", "::", "")
_FINGERPRINT_CONTEXT = b"codebot web console session v2"


@dataclass(frozen=True)
class Viewer:
    name: str
    sees_questions: bool


def fingerprint(token: str) -> str:
    """What a session remembers of the token it was opened with."""
    return hmac.new(token.encode(), _FINGERPRINT_CONTEXT, hashlib.sha256).hexdigest()


def _token(settings: Settings, variable: str, name: str) -> str | None:
    secret = getattr(settings, name)
    if secret is None:
        return None
    token: str = secret.get_secret_value().strip()
    if len(token) < texts.MIN_TOKEN_CHARS:
        raise ConfigError(texts.token_too_short(variable, len(token)))
    return token


def allowed_hosts(settings: Settings, listen_host: str) -> list[str]:
    """The Host names a request may carry: local names, the address listened on (when it is one
    address) and CODEBOT_WEB_ALLOWED_HOSTS. Any other Host is refused (DNS rebinding)."""
    listened = [] if listen_host in ANY_ADDRESS else [listen_host]
    if ":" in listen_host and not listen_host.startswith("["):
        listened = [f"[{listen_host}]"]  # an IPv6 address, as a Host header writes it
    named = [h.strip().lower() for h in settings.web_allowed_hosts if h.strip()]
    return list(dict.fromkeys([*LOCAL_HOSTS, *listened, *named]))


class Gate:
    def __init__(self, settings: Settings) -> None:
        self.tokens: list[tuple[str, Viewer]] = []
        admin = _token(settings, "CODEBOT_WEB_ADMIN_TOKEN", "web_admin_token")
        if admin is not None:
            self.tokens.append((admin, Viewer("admin token", True)))
        operator = _token(settings, "CODEBOT_WEB_TOKEN", "web_token")
        if operator is not None:
            self.tokens.append((operator, Viewer("operator token", False)))
        self.proxy_header = settings.web_proxy_user_header.strip().lower()
        self.proxies = [ipaddress.ip_network(p.strip(), strict=False) for p in settings.web_trusted_proxies]
        self.admins = frozenset(settings.web_admins)
        if not self.tokens and not self.proxy_header:
            raise ConfigError(texts.NO_WAY_IN)
        if self.proxy_header and not self.proxies:
            raise ConfigError(texts.PROXY_WITHOUT_TRUSTED_PROXIES)

    def by_token(self, given: str) -> Viewer | None:
        for token, viewer in self.tokens:
            if given and hmac.compare_digest(given.encode(), token.encode()):
                return viewer
        return None

    def fingerprint_for(self, given: str) -> str | None:
        """What a session opened with `given` remembers; None: not one of the tokens."""
        return fingerprint(given) if self.by_token(given) else None

    def by_fingerprint(self, remembered: str) -> Viewer | None:
        """The viewer of a session, while the token it was opened with is still configured."""
        for token, viewer in self.tokens:
            if remembered and hmac.compare_digest(remembered.encode(), fingerprint(token).encode()):
                return viewer
        return None

    def is_trusted_proxy(self, peer: str) -> bool:
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:  # no peer address (a unix socket): not a proxy we know
            return False
        return any(address in network for network in self.proxies)

    def proxied(self, headers: dict[str, str], peer: str) -> Viewer | None:
        """The user a trusted proxy names; None when there is no header or the peer is not one."""
        user = headers.get(self.proxy_header, "").strip() if self.proxy_header else ""
        if not user or not self.is_trusted_proxy(peer):
            return None
        return Viewer(user, user in self.admins)
