"""Push deliveries in each forge's real shape (headers and body, from the forges' own docs), signed
as each forge signs them, and a client that POSTs them to `codebot webhooks` over a real socket.

    delivery = github_push("https://github.com/acme/payments", "main", sha, secret)
    status, verdict = post(port, delivery)

Only the fields a receiver could use and a few around them are filled in; the shapes (where the
repo's URLs, the ref and the new commit sit) are the forges' own.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import uuid
from dataclasses import dataclass, replace
from typing import Any

BEFORE = "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"


@dataclass(frozen=True)
class Delivery:
    headers: dict[str, str]
    body: bytes
    path: str = "/webhooks"
    method: str = "POST"

    def with_headers(self, **changes: str) -> Delivery:
        """The same delivery with headers changed (`x_hub_signature_256="..."`); "" removes one."""
        headers = dict(self.headers)
        for key, value in changes.items():
            name = key.replace("_", "-")
            headers = {k: v for k, v in headers.items() if k.lower() != name.lower()}
            if value:
                headers[name] = value
        return replace(self, headers=headers)


def hmac_hex(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _commit(web: str, sha: str, path: str = "commit") -> dict[str, Any]:
    return {
        "id": sha,
        "message": "Fix the retry bug\n",
        "timestamp": "2026-12-07T10:00:00+00:00",
        "url": f"{web}/{path}/{sha}",
        "author": {"name": "Ada", "email": "ada@example.com", "username": "ada"},
        "added": [],
        "removed": [],
        "modified": ["payments/retry.py"],
    }


def _host_and_path(web: str) -> tuple[str, str]:
    host, _, path = web.removeprefix("https://").partition("/")
    return host, path


def github_push(web: str, branch: str, sha: str, secret: str, default_branch: str = "main") -> Delivery:
    host, full_name = _host_and_path(web)
    body = {
        "ref": f"refs/heads/{branch}",
        "before": BEFORE,
        "after": sha,
        "created": False,
        "deleted": False,
        "forced": False,
        "base_ref": None,
        "compare": f"{web}/compare/{BEFORE[:12]}...{sha[:12]}",
        "commits": [_commit(web, sha)],
        "head_commit": _commit(web, sha),
        "repository": {
            "id": 1296269,
            "name": full_name.split("/")[-1],
            "full_name": full_name,
            "private": True,
            "html_url": web,
            "url": web,
            "git_url": f"git://{host}/{full_name}.git",
            "ssh_url": f"git@{host}:{full_name}.git",
            "clone_url": f"{web}.git",
            "default_branch": default_branch,
            "master_branch": default_branch,
        },
        "pusher": {"name": "ada", "email": "ada@example.com"},
        "sender": {"login": "ada", "id": 1},
    }
    return _github_style(body, "push", secret)


def github_ping(web: str, secret: str) -> Delivery:
    _, full_name = _host_and_path(web)
    body = {
        "zen": "Design for failure.",
        "hook_id": 30,
        "hook": {"type": "Repository", "id": 30, "active": True, "events": ["push"]},
        "repository": {"full_name": full_name, "html_url": web, "clone_url": f"{web}.git"},
        "sender": {"login": "ada", "id": 1},
    }
    return _github_style(body, "ping", secret)


def _github_style(payload: dict[str, Any], event: str, secret: str) -> Delivery:
    body = json.dumps(payload).encode()
    return Delivery(
        {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/044aadd",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-GitHub-Hook-ID": "30",
            "X-Hub-Signature-256": "sha256=" + hmac_hex(secret, body),
        },
        body,
    )


def gitlab_push(web: str, branch: str, sha: str, secret: str) -> Delivery:
    host, path = _host_and_path(web)
    project = {
        "id": 15,
        "name": path.split("/")[-1],
        "web_url": web,
        "git_ssh_url": f"git@{host}:{path}.git",
        "git_http_url": f"{web}.git",
        "namespace": path.split("/")[0],
        "visibility_level": 0,
        "path_with_namespace": path,
        "default_branch": "main",
        "homepage": web,
        "url": f"git@{host}:{path}.git",
        "ssh_url": f"git@{host}:{path}.git",
        "http_url": f"{web}.git",
    }
    body = {
        "object_kind": "push",
        "event_name": "push",
        "before": BEFORE,
        "after": sha,
        "ref": f"refs/heads/{branch}",
        "ref_protected": True,
        "checkout_sha": sha,
        "user_id": 4,
        "user_name": "Ada",
        "user_username": "ada",
        "project_id": 15,
        "project": project,
        "commits": [_commit(web, sha, "-/commit")],
        "total_commits_count": 1,
        "repository": {
            "name": project["name"],
            "url": project["url"],
            "description": "",
            "homepage": web,
            "git_http_url": f"{web}.git",
            "git_ssh_url": f"git@{host}:{path}.git",
            "visibility_level": 0,
        },
    }
    event_uuid = str(uuid.uuid4())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "GitLab/17.6.0",
        "X-Gitlab-Event": "Push Hook",
        "X-Gitlab-Token": secret,
        "X-Gitlab-Instance": f"https://{host}",
        "X-Gitlab-Webhook-UUID": "6d9b0b1c-3cb6-4e1a-9f55-2d5f3a6e0a11",
        "X-Gitlab-Event-UUID": event_uuid,
        "Idempotency-Key": event_uuid,
    }
    return Delivery(headers, json.dumps(body).encode())


def gitea_push(web: str, branch: str, sha: str, secret: str, forgejo: bool = False) -> Delivery:
    """Gitea's push (Forgejo's: the same, with X-Forgejo-* headers as well): GitHub's shape, and
    GitHub's and Gogs' event headers beside its own."""
    host, full_name = _host_and_path(web)
    body = json.dumps(
        {
            "ref": f"refs/heads/{branch}",
            "before": BEFORE,
            "after": sha,
            "compare_url": f"{web}/compare/{BEFORE}...{sha}",
            "commits": [_commit(web, sha)],
            "repository": {
                "id": 140,
                "owner": {"id": 1, "login": full_name.split("/")[0], "full_name": ""},
                "name": full_name.split("/")[-1],
                "full_name": full_name,
                "private": False,
                "html_url": web,
                "ssh_url": f"git@{host}:{full_name}.git",
                "clone_url": f"{web}.git",
                "default_branch": "main",
            },
            "pusher": {"id": 1, "login": "ada"},
            "sender": {"id": 1, "login": "ada"},
        }
    ).encode()
    delivery_id = str(uuid.uuid4())
    signature = hmac_hex(secret, body)
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Delivery": delivery_id,
        "X-GitHub-Event": "push",
        "X-Gogs-Delivery": delivery_id,
        "X-Gogs-Event": "push",
        "X-Gitea-Delivery": delivery_id,
        "X-Gitea-Event": "push",
        "X-Gitea-Signature": signature,
        "X-Hub-Signature-256": "sha256=" + signature,
    }
    if forgejo:
        headers.update(
            {"X-Forgejo-Delivery": delivery_id, "X-Forgejo-Event": "push", "X-Forgejo-Signature": signature}
        )
    return Delivery(headers, body)


def bitbucket_cloud_push(web: str, branch: str, sha: str, secret: str) -> Delivery:
    _, full_name = _host_and_path(web)
    api = f"https://api.bitbucket.org/2.0/repositories/{full_name}"
    target = {
        "type": "commit",
        "hash": sha,
        "message": "Fix the retry bug\n",
        "date": "2026-12-07T10:00:00+00:00",
        "links": {"self": {"href": f"{api}/commit/{sha}"}, "html": {"href": f"{web}/commits/{sha}"}},
    }
    body = json.dumps(
        {
            "actor": {
                "type": "user",
                "display_name": "Ada",
                "uuid": "{d301aafa-d676-4ee0-88be-962be7417567}",
            },
            "repository": {
                "type": "repository",
                "name": full_name.split("/")[-1],
                "full_name": full_name,
                "uuid": "{5b6cc2a1-4841-469e-aebe-b0b58e14ffd3}",
                "links": {"self": {"href": api}, "html": {"href": web}},
                "scm": "git",
                "is_private": True,
            },
            "push": {
                "changes": [
                    {
                        "new": {"type": "branch", "name": branch, "target": target},
                        "old": {"type": "branch", "name": branch, "target": {**target, "hash": BEFORE}},
                        "created": False,
                        "closed": False,
                        "forced": False,
                        "truncated": False,
                        "commits": [target],
                    }
                ]
            },
        }
    ).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Bitbucket-Webhooks/2.0",
        "X-Event-Key": "repo:push",
        "X-Hook-UUID": "{0f5b7e0e-7d0b-4a5b-8d6f-4c2d3b1a0e9f}",
        "X-Request-UUID": str(uuid.uuid4()),
        "X-Attempt-Number": "1",
        "X-Hub-Signature": "sha256=" + hmac_hex(secret, body),
    }
    return Delivery(headers, body)


def bitbucket_server_push(host: str, project: str, slug: str, branch: str, sha: str, secret: str) -> Delivery:
    """Bitbucket Server / Data Center's repo:refs_changed."""
    body = json.dumps(
        {
            "eventKey": "repo:refs_changed",
            "date": "2026-12-07T10:00:00+0000",
            "actor": {"name": "ada", "id": 1, "displayName": "Ada", "slug": "ada", "type": "NORMAL"},
            "repository": {
                "slug": slug,
                "id": 84,
                "name": slug,
                "scmId": "git",
                "state": "AVAILABLE",
                "forkable": True,
                "project": {"key": project, "id": 84, "name": project, "public": False, "type": "NORMAL"},
                "public": False,
                "links": {
                    "clone": [
                        {"href": f"ssh://git@{host}:7999/{project.lower()}/{slug}.git", "name": "ssh"},
                        {"href": f"https://{host}/scm/{project.lower()}/{slug}.git", "name": "http"},
                    ],
                    "self": [{"href": f"https://{host}/projects/{project}/repos/{slug}/browse"}],
                },
            },
            "changes": [
                {
                    "ref": {"id": f"refs/heads/{branch}", "displayId": branch, "type": "BRANCH"},
                    "refId": f"refs/heads/{branch}",
                    "fromHash": BEFORE,
                    "toHash": sha,
                    "type": "UPDATE",
                }
            ],
        }
    ).encode()
    headers = {
        "Content-Type": "application/json; charset=UTF-8",
        "X-Event-Key": "repo:refs_changed",
        "X-Request-Id": str(uuid.uuid4()),
        "X-Hub-Signature": "sha256=" + hmac_hex(secret, body),
    }
    return Delivery(headers, body)


def post(port: int, delivery: Delivery, timeout: float = 60.0) -> tuple[int, dict[str, Any]]:
    """Send one delivery over a new connection; the status and the JSON verdict."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(delivery.method, delivery.path, body=delivery.body, headers=delivery.headers)
        response = connection.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else {}
    finally:
        connection.close()
