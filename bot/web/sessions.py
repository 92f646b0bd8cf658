"""The console's logins, kept in Redis: sessions that logging out ends, and failed logins counted.

A session is a random id in the cookie; Redis keeps, under a hash of that id (a copy of Redis
holds no usable cookie), the fingerprint of the token it was opened with, for
`web_session_seconds`. Logging out deletes it, so a copied cookie stops working then.

Failed logins (the form or a wrong `Authorization: Bearer`) are counted per peer address and in
all, in fixed windows of `web_login_window_seconds` on the console's clock: over
`web_login_failures_per_address` from one address, or `web_login_failures_total` from all, a
login is answered 429 with Retry-After until the window ends, the right token included (else a
guesser would learn when they guessed right). Counts live in Redis so every console process
shares them.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Callable

from redis import Redis

from config.settings import Settings

SESSION_PREFIX = "codebot:web:session:"
FAILURES_PREFIX = "codebot:web:login-failures:"


def _session_key(session_id: str) -> str:
    return SESSION_PREFIX + hashlib.sha256(session_id.encode()).hexdigest()


class Sessions:
    def __init__(self, redis: Redis, settings: Settings) -> None:
        self.redis = redis
        self.seconds = settings.web_session_seconds

    def open(self, token_fingerprint: str) -> str:
        """A new session for a correct token; returns the cookie's value."""
        session_id = secrets.token_urlsafe(32)
        self.redis.set(_session_key(session_id), token_fingerprint, ex=self.seconds)
        return session_id

    def fingerprint_of(self, session_id: str) -> str | None:
        if not session_id:
            return None
        value = self.redis.get(_session_key(session_id))
        return value.decode() if isinstance(value, bytes) else value

    def close(self, session_id: str) -> None:
        if session_id:
            self.redis.delete(_session_key(session_id))


class LoginThrottle:
    def __init__(self, redis: Redis, settings: Settings, clock: Callable[[], float]) -> None:
        self.redis = redis
        self.window = settings.web_login_window_seconds
        self.per_address = settings.web_login_failures_per_address
        self.total = settings.web_login_failures_total
        self.clock = clock

    def _keys(self, peer: str) -> tuple[str, str, float]:
        now = self.clock()
        window = int(now // self.window)
        base = f"{FAILURES_PREFIX}{window}:"
        return base + "total", base + "address:" + peer, (window + 1) * self.window - now

    def wait_seconds(self, peer: str) -> int:
        """0: `peer` may try to log in now; else the seconds until it may."""
        total_key, peer_key, left = self._keys(peer)
        total, mine = (int(v or 0) for v in self.redis.mget([total_key, peer_key]))
        if total >= self.total or mine >= self.per_address:
            return max(1, math.ceil(left))
        return 0

    def failed(self, peer: str) -> None:
        total_key, peer_key, _ = self._keys(peer)
        pipe = self.redis.pipeline()
        for key in (total_key, peer_key):
            pipe.incr(key)
            pipe.expire(key, 2 * self.window)
        pipe.execute()
