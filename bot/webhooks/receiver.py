"""One forge delivery, from its headers and raw body to a verdict: verify, match, queue a refresh.

The order is what makes it safe under any input:
1. the forge, from its event header (none: 401);
2. the repos the payload names (read, not yet believed), and the secret of each: its own
   `webhook_secret`, else its forge's setting; a payload naming no whitelisted repo (or not JSON)
   is checked against the forge's secret alone;
3. the signature, in constant time, on the raw bytes: no secret it matches, 401, and nothing
   was written anywhere;
4. only then: not JSON (400), a replayed delivery id (200, nothing done), a ping (200), another
   event (202), no whitelisted repo or another branch (202), else a refresh of each repo the
   delivery was signed for, queued or absorbed by one already waiting (202).
Log lines name the forge, the delivery id (sanitised), the verdict and the repos' names: never a
body, a header's other values or a secret.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from pydantic import SecretStr
from redis import Redis
from redis.exceptions import RedisError

from bot.webhooks import texts
from bot.webhooks.forges import READERS, ForgeKind, Headers, Push, delivery_id, forge_of, repo_of_ping, signed
from bot.webhooks.matching import matching_repos, tracked_commit
from config.errors import ConfigError
from config.repos import RepoSpec, Whitelist
from config.settings import Settings
from worker.jobs.push_refresh import enqueue_push_refresh, first_delivery, forget_delivery, record_delivery

log = logging.getLogger("codebot.webhooks")

_UNSAFE_ID = re.compile(r"[^A-Za-z0-9._:{}-]")
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"


@dataclass(frozen=True)
class Verdict:
    status: int
    verdict: str
    repos: tuple[str, ...] = ()


class Secrets:
    """Each forge family's secret (settings) and each repo's own (`webhook_secret`, read from the
    environment variable it names, at start)."""

    def __init__(self, settings: Settings, whitelist: Whitelist, environ: Mapping[str, str] = os.environ):
        self.families: dict[str, SecretStr | None] = {
            "github": settings.webhooks_github_secret,
            "gitlab": settings.webhooks_gitlab_secret,
            "gitea": settings.webhooks_gitea_secret,
            "bitbucket": settings.webhooks_bitbucket_secret,
        }
        self.repos: dict[str, SecretStr] = {}
        for spec in whitelist.repos:
            variable = spec.webhook_secret_variable
            if variable is None:
                continue
            if not environ.get(variable, "").strip():
                where = f"{whitelist.path}:{spec.line}" if spec.line else str(whitelist.path)
                raise ConfigError(texts.secret_variable_unset(where, spec.name, variable))
            self.repos[spec.name] = SecretStr(environ[variable].strip())
        if not self.repos and not any(self.families.values()):
            raise ConfigError(texts.NO_SECRET)

    def of_forge(self, forge: ForgeKind) -> str | None:
        secret = self.families.get(forge.family)
        return secret.get_secret_value() if secret else None

    def of_repo(self, spec: RepoSpec, forge: ForgeKind) -> str | None:
        own = self.repos.get(spec.name)
        return own.get_secret_value() if own else self.of_forge(forge)


def safe_id(raw: str) -> str:
    """A delivery id as it may appear in a log line or a Redis key: inert, bounded."""
    return _UNSAFE_ID.sub("?", raw)[:100]


def read_payload(headers: Headers, body: bytes) -> dict[str, Any] | None:
    """The JSON object a delivery carries (in a form's `payload` field, GitHub's and Gitea's other
    content type), or None."""
    try:
        if headers.get("content-type", "").split(";")[0].strip().lower() == FORM_CONTENT_TYPE:
            fields = parse_qs(body.decode("utf-8"), max_num_fields=10)
            body = (fields.get("payload") or [""])[0].encode("utf-8")
        payload = json.loads(body)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    return payload if isinstance(payload, dict) else None


class Receiver:
    def __init__(self, settings: Settings, whitelist: Whitelist, secrets: Secrets, redis: Redis) -> None:
        self.settings = settings
        self.whitelist = whitelist
        self.secrets = secrets
        self.redis = redis

    def receive(self, headers: Headers, body: bytes) -> Verdict:
        """The verdict on one delivery; everything it queued is queued when it returns."""
        forge = forge_of(headers)
        if forge is None:
            log.info("webhook forge=- delivery=- verdict=%s", texts.NOT_A_FORGE)
            return Verdict(401, texts.NOT_A_FORGE)
        delivery = safe_id(delivery_id(forge, headers))
        try:
            verdict = self._verdict(forge, delivery, headers, body)
        except RedisError as exc:
            log.warning("webhook forge=%s delivery=%s: Redis unavailable (%s)", forge.name, delivery, exc)
            return Verdict(503, texts.QUEUE_DOWN)
        log.info(
            "webhook forge=%s delivery=%s status=%s verdict=%s repos=%s",
            forge.name,
            delivery or "-",
            verdict.status,
            verdict.verdict,
            ",".join(verdict.repos) or "-",
        )
        with contextlib.suppress(RedisError):  # `codebot status` misses one; the delivery was handled
            record_delivery(
                self.redis, forge.name, verdict.verdict, verdict.status, delivery, ",".join(verdict.repos)
            )
        return verdict

    def _verdict(self, forge: ForgeKind, delivery: str, headers: Headers, body: bytes) -> Verdict:
        payload = read_payload(headers, body)
        event = headers.get(forge.event_header, "")
        ping = event in forge.ping_events
        push = self._push(forge, payload, ping)
        named = matching_repos(self.whitelist, push) if push is not None else []
        signed_for = [s for s in named if self._signed(forge, headers, body, self.secrets.of_repo(s, forge))]
        if not signed_for and (named or not self._signed(forge, headers, body, self.secrets.of_forge(forge))):
            return Verdict(401, texts.BAD_SIGNATURE)
        if payload is None or push is None:
            return Verdict(400, texts.NOT_JSON)
        if delivery and not first_delivery(
            self.redis, forge.name, delivery, self.settings.webhooks_replay_seconds
        ):
            return Verdict(200, texts.REPLAY)
        if ping:
            return Verdict(200, texts.PONG)
        if event not in forge.push_events:
            return Verdict(202, texts.NOT_A_PUSH)
        if not signed_for:
            return Verdict(202, texts.UNKNOWN_REPO)
        try:
            return self._refresh(forge, push, signed_for)
        except RedisError:
            if delivery:  # the forge's redelivery of it must not be taken for a replay
                with contextlib.suppress(RedisError):
                    forget_delivery(self.redis, forge.name, delivery)
            raise

    def _push(self, forge: ForgeKind, payload: dict[str, Any] | None, ping: bool) -> Push | None:
        if payload is None:
            return None
        return repo_of_ping(payload) if ping else READERS[forge.name](payload)

    @staticmethod
    def _signed(forge: ForgeKind, headers: Headers, body: bytes, secret: str | None) -> bool:
        return bool(secret) and signed(forge, headers, body, secret or "")

    def _refresh(self, forge: ForgeKind, push: Push, specs: list[RepoSpec]) -> Verdict:
        queued, absorbed = [], []
        for spec in specs:
            sha = tracked_commit(spec, push)
            if sha is None:
                continue
            if enqueue_push_refresh(self.redis, spec.name, sha, forge.name):
                queued.append(spec.name)
            else:
                absorbed.append(spec.name)
        if not queued and not absorbed:
            return Verdict(202, texts.OTHER_BRANCH, tuple(s.name for s in specs))
        return Verdict(202, texts.QUEUED if queued else texts.ABSORBED, tuple(queued + absorbed))
