"""`codebot webhooks` for tests: the real receiver on a real socket, a real bare repo that tests
push to, embedded Redis, and a real burst RQ worker that runs the refreshes it queued.

One bare repo stands behind six whitelist entries, one per forge (each its own web URL, hence
its own mirror), plus `vault`, whose deliveries must carry its own secret.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from redis import Redis
from rq import Queue, SimpleWorker

from bot.webhooks.server import WebhooksServer, build_server
from config.settings import Settings, load_settings
from tests.support.forge_payloads import (
    Delivery,
    bitbucket_cloud_push,
    bitbucket_server_push,
    gitea_push,
    github_push,
    gitlab_push,
    post,
)
from tests.support.git_remote import GitRemote, write_whitelist
from worker.jobs import runtime as runtime_module
from worker.jobs.queue import ADMIN_QUEUE
from worker.jobs.runtime import Runtime, build_runtime
from worker.ops.redis_connection import connect, stop_embedded_server
from worker.repos.refresh import sync_history

SECRETS = {
    "github": "github-hook-secret-5b8f0a",
    "gitlab": "gitlab-hook-token-91c2d4",
    "gitea": "gitea-hook-secret-7e3a11",
    "bitbucket": "bitbucket-hook-secret-c04f9e",
}
VAULT_SECRET = "vault-own-secret-2f6d83"
WEB_URLS = {
    "payments": "https://github.com/acme/payments",
    "billing": "https://gitlab.com/acme/billing",
    "ledger": "https://git.acme.dev/acme/ledger",
    "journal": "https://codeberg.org/acme/journal",
    "invoices": "https://bitbucket.org/acme/invoices",
    "reports": "https://bitbucket.acme.dev/projects/ACME/repos/reports/browse",
    "vault": "https://github.com/acme/vault",
}
# Each forge's repo in the rig and the family whose secret signs its deliveries.
FORGE_REPOS = {
    "github": ("payments", "github"),
    "gitlab": ("billing", "gitlab"),
    "gitea": ("ledger", "gitea"),
    "forgejo": ("journal", "gitea"),
    "bitbucket": ("invoices", "bitbucket"),
    "bitbucket-server": ("reports", "bitbucket"),
}


def push_from(forge: str, sha: str, branch: str = "main", secret: str | None = None) -> Delivery:
    """`forge`'s push of `sha` to `branch` of its repo in the rig, in that forge's shape, signed
    with the forge's secret (or `secret`)."""
    name, family = FORGE_REPOS[forge]
    key, web = secret if secret is not None else SECRETS[family], WEB_URLS[name]
    if forge == "github":
        return github_push(web, branch, sha, key)
    if forge == "gitlab":
        return gitlab_push(web, branch, sha, key)
    if forge in ("gitea", "forgejo"):
        return gitea_push(web, branch, sha, key, forgejo=forge == "forgejo")
    if forge == "bitbucket":
        return bitbucket_cloud_push(web, branch, sha, key)
    return bitbucket_server_push("bitbucket.acme.dev", "ACME", "reports", branch, sha, key)


@dataclass
class HooksRig:
    settings: Settings
    redis: Redis
    runtime: Runtime
    remote: GitRemote
    server: WebhooksServer

    def post(self, delivery: Delivery) -> tuple[int, dict[str, Any]]:
        return post(self.server.port, delivery)

    def queued(self) -> int:
        """Refresh jobs waiting on the admin queue."""
        return Queue(ADMIN_QUEUE, connection=self.redis).count

    def work(self) -> None:
        """A real RQ worker, in burst mode: runs every queued refresh, then returns."""
        SimpleWorker([Queue(ADMIN_QUEUE, connection=self.redis)], connection=self.redis).work(
            burst=True, logging_level="WARNING"
        )

    def served(self, name: str) -> str | None:
        snapshot = self.runtime.mirrors.current(name)
        return snapshot.sha if snapshot else None

    def refreshes(self, name: str) -> int:
        """Refreshes of `name` recorded in Redis (one per sync a refresh job ran)."""
        return len(sync_history(self.redis, name))


def build_hooks_rig(tmp: Path, monkeypatch: pytest.MonkeyPatch, **overrides: Any) -> Iterator[HooksRig]:
    remote = GitRemote.create(tmp / "forge")
    entries: list[dict[str, Any]] = [
        {"name": name, "url": str(remote.bare), "branch": "main", "web_url": web}
        for name, web in WEB_URLS.items()
    ]
    entries[-1]["webhook_secret"] = "${VAULT_HOOK_SECRET}"
    # named only by an ssh URL (never fetched in the tests): its web URL is inferred
    entries.append({"name": "shop", "url": "git@github.com:Acme/Shop.git", "branch": "main"})
    write_whitelist(tmp, entries)
    monkeypatch.setenv("VAULT_HOOK_SECRET", VAULT_SECRET)
    options: dict[str, Any] = {
        "data_dir": tmp / "data",
        "repos_file": tmp / "repos.toml",
        "webhooks_max_body_bytes": 64_000,
        **{f"webhooks_{family}_secret": secret for family, secret in SECRETS.items()},
        **overrides,
    }
    settings = load_settings(env_file=None, **options)
    runtime = build_runtime(settings)
    runtime_module.install(runtime)
    redis = connect(settings)
    server = build_server(settings, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield HooksRig(settings, redis, runtime, remote, server)
    finally:
        server.close()
        thread.join(30)
        stop_embedded_server(settings)
