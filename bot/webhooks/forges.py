"""What each forge sends: which headers name it, how it signs, and where a push says what moved.

Every value here comes from a request anyone can send: nothing is trusted until the signature
checks out, and every payload field is read defensively (a missing or oddly typed field reads as
nothing, never as an error).

| forge | event header (push; ping) | signature | delivery id |
|---|---|---|---|
| GitHub | X-GitHub-Event (`push`; `ping`) | X-Hub-Signature-256: `sha256=` HMAC-SHA256 | X-GitHub-Delivery |
| GitLab | X-Gitlab-Event (`Push Hook`) | X-Gitlab-Token: the secret itself | Idempotency-Key, X-Gitlab-Event-UUID |
| Gitea | X-Gitea-Event (`push`) | X-Gitea-Signature: hex HMAC-SHA256 | X-Gitea-Delivery |
| Forgejo | X-Forgejo-Event (`push`) | X-Forgejo-Signature: hex HMAC-SHA256 | X-Forgejo-Delivery |
| Bitbucket Cloud | X-Event-Key (`repo:push`) | X-Hub-Signature: `sha256=` HMAC-SHA256 | X-Request-UUID |
| Bitbucket Server/DC | X-Event-Key (`repo:refs_changed`; `diagnostics:ping`) | X-Hub-Signature: `sha256=` HMAC-SHA256 | X-Request-Id |

Gitea and Forgejo also send GitHub's and Gogs' headers, so they are recognised first.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Scheme = Literal["hmac-sha256=", "hmac-hex", "token"]
Headers = Mapping[str, str]  # lower-cased names
BRANCH_PREFIX = "refs/heads/"
DELETED_SHA = "0" * 40
MAX_DELIVERY_ID_CHARS = 200  # a delivery id is a UUID or so; anything longer is cut before use


@dataclass(frozen=True)
class ForgeKind:
    name: str  # as logged and shown in `codebot status`
    family: str  # whose secret setting applies: github, gitlab, gitea, bitbucket
    event_header: str
    signature_header: str
    scheme: Scheme
    delivery_headers: tuple[str, ...]
    push_events: frozenset[str]
    ping_events: frozenset[str]


FORGES = (
    ForgeKind(
        "forgejo", "gitea", "x-forgejo-event", "x-forgejo-signature", "hmac-hex",
        ("x-forgejo-delivery",), frozenset({"push"}), frozenset(),
    ),
    ForgeKind(
        "gitea", "gitea", "x-gitea-event", "x-gitea-signature", "hmac-hex",
        ("x-gitea-delivery",), frozenset({"push"}), frozenset(),
    ),
    ForgeKind(
        "gitlab", "gitlab", "x-gitlab-event", "x-gitlab-token", "token",
        ("idempotency-key", "x-gitlab-event-uuid"), frozenset({"Push Hook"}), frozenset(),
    ),
    ForgeKind(
        "github", "github", "x-github-event", "x-hub-signature-256", "hmac-sha256=",
        ("x-github-delivery",), frozenset({"push"}), frozenset({"ping"}),
    ),
    ForgeKind(
        "bitbucket", "bitbucket", "x-event-key", "x-hub-signature", "hmac-sha256=",
        ("x-request-uuid",), frozenset({"repo:push"}), frozenset(),
    ),
    ForgeKind(
        "bitbucket-server", "bitbucket", "x-event-key", "x-hub-signature", "hmac-sha256=",
        ("x-request-id",), frozenset({"repo:refs_changed"}), frozenset({"diagnostics:ping"}),
    ),
)  # fmt: skip


def forge_of(headers: Headers) -> ForgeKind | None:
    """The forge a request's headers name; Bitbucket Cloud and Server by their delivery header."""
    for forge in FORGES:
        if forge.event_header not in headers:
            continue
        if forge.name == "bitbucket" and "x-request-uuid" not in headers:
            continue  # Bitbucket Server/Data Center: the same event header, X-Request-Id
        return forge
    return None


def delivery_id(forge: ForgeKind, headers: Headers) -> str:
    for name in forge.delivery_headers:
        if headers.get(name):
            return headers[name][:MAX_DELIVERY_ID_CHARS]
    return ""


def signed(forge: ForgeKind, headers: Headers, body: bytes, secret: str) -> bool:
    """Does the request carry `secret`'s signature of `body`? Compared in constant time, as bytes
    (a header is latin-1 text: any byte, never an error)."""
    given = headers.get(forge.signature_header, "").strip().encode("latin-1", errors="replace")
    key = secret.encode("utf-8")
    if forge.scheme == "token":
        return hmac.compare_digest(given, key)
    expected = hmac.new(key, body, hashlib.sha256).hexdigest().encode("ascii")
    if forge.scheme == "hmac-sha256=":
        expected = b"sha256=" + expected
    return hmac.compare_digest(given.lower(), expected)


@dataclass(frozen=True)
class Push:
    """What a push payload says: the repo (by its URLs and full name) and the branches it moved."""

    urls: tuple[str, ...]
    full_name: str
    moved: tuple[tuple[str, str], ...]  # (branch, its new commit) for each branch updated or created
    default_branch: str | None


def _at(value: Any, *path: str | int) -> Any:
    for step in path:
        if isinstance(step, int):
            value = value[step] if isinstance(value, list) and -len(value) <= step < len(value) else None
        else:
            value = value.get(step) if isinstance(value, dict) else None
    return value


def _text(value: Any, *path: str | int) -> str:
    found = _at(value, *path)
    return found if isinstance(found, str) else ""


def _list(value: Any, *path: str) -> list[Any]:
    found = _at(value, *path)
    return found if isinstance(found, list) else []


def _urls(*candidates: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(url for url in candidates if url))


def _branch_moved(ref: str, sha: str) -> tuple[tuple[str, str], ...]:
    """A single-ref push (GitHub, GitLab, Gitea): its branch and new commit, unless it deleted it."""
    if not ref.startswith(BRANCH_PREFIX) or not sha or sha == DELETED_SHA:
        return ()
    return ((ref.removeprefix(BRANCH_PREFIX), sha),)


def github_push(payload: dict[str, Any]) -> Push:
    """GitHub's push, and Gitea's and Forgejo's, which take its shape."""
    repo = payload.get("repository")
    return Push(
        urls=_urls(*(_text(repo, key) for key in ("clone_url", "ssh_url", "git_url", "html_url", "url"))),
        full_name=_text(repo, "full_name"),
        moved=_branch_moved(_text(payload, "ref"), _text(payload, "after")),
        default_branch=_text(repo, "default_branch") or None,
    )


def gitlab_push(payload: dict[str, Any]) -> Push:
    project, repo = payload.get("project"), payload.get("repository")
    return Push(
        urls=_urls(
            *(_text(project, key) for key in ("git_http_url", "git_ssh_url", "web_url", "http_url")),
            *(_text(repo, key) for key in ("git_http_url", "git_ssh_url", "homepage", "url")),
        ),
        full_name=_text(project, "path_with_namespace"),
        moved=_branch_moved(_text(payload, "ref"), _text(payload, "checkout_sha") or _text(payload, "after")),
        default_branch=_text(project, "default_branch") or None,
    )


def bitbucket_cloud_push(payload: dict[str, Any]) -> Push:
    repo = payload.get("repository")
    moved: list[tuple[str, str]] = []
    for change in _list(payload, "push", "changes"):
        new = _at(change, "new")  # null: the branch was deleted
        if _text(new, "type") == "branch" and _text(new, "name") and _text(new, "target", "hash"):
            moved.append((_text(new, "name"), _text(new, "target", "hash")))
    return Push(
        urls=_urls(_text(repo, "links", "html", "href")),
        full_name=_text(repo, "full_name"),
        moved=tuple(moved),
        default_branch=_text(repo, "mainbranch", "name") or None,
    )


def bitbucket_server_push(payload: dict[str, Any]) -> Push:
    repo = payload.get("repository")
    links = [_text(link, "href") for link in _list(repo, "links", "clone") + _list(repo, "links", "self")]
    moved: list[tuple[str, str]] = []
    for change in _list(payload, "changes"):
        ref = _text(change, "refId") or _text(change, "ref", "id")
        if _text(change, "type") != "DELETE":
            moved.extend(_branch_moved(ref, _text(change, "toHash")))
    project, slug = _text(repo, "project", "key"), _text(repo, "slug")
    return Push(
        urls=_urls(*links),
        full_name=f"{project}/{slug}" if project and slug else "",
        moved=tuple(moved),
        default_branch=None,
    )


def repo_of_ping(payload: dict[str, Any]) -> Push:
    """A ping names its repo (a repo's hook) or none (an organisation's): nothing moved."""
    push = github_push(payload)
    return Push(push.urls, push.full_name, (), push.default_branch)


READERS: dict[str, Callable[[dict[str, Any]], Push]] = {
    "github": github_push,
    "gitea": github_push,
    "forgejo": github_push,
    "gitlab": gitlab_push,
    "bitbucket": bitbucket_cloud_push,
    "bitbucket-server": bitbucket_server_push,
}
