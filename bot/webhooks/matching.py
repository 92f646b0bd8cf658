"""Which whitelisted repos a push is about: its URLs and full name against repos.toml.

URLs are compared as `host/path`: scheme, credentials, port, `.git`, a trailing slash and case
left out, so `git@github.com:Acme/Payments.git`, `ssh://git@github.com/acme/payments` and
`https://github.com/acme/payments/` are one repo. Bitbucket Server's `/scm/PROJ/repo` (clone)
and `/projects/PROJ/repos/repo/browse` (web) paths read as `proj/repo`, like its ssh URLs. A
full name (`acme/payments`) matches a repo whose URL has that path on a host the push names.
Several entries may share one URL (two branches of a repo): each is matched.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from bot.webhooks.forges import Push
from config.repos import RepoSpec, Whitelist

_SCP = re.compile(r"^[^\s/@]+@([^\s/:]+):(.+)$")  # git@host:owner/repo.git
_BITBUCKET_SERVER_WEB = re.compile(r"^projects/([^/]+)/repos/([^/]+)(?:/.*)?$")


def identity(url: str) -> str | None:
    """`host/path`, lower-cased, for any git or web URL; None for a local path or no URL."""
    scp = _SCP.match(url.strip())
    if scp:
        host, path = scp.group(1), scp.group(2)
    else:
        try:
            parts = urlsplit(url.strip())
            host = parts.hostname or ""
        except ValueError:  # a malformed port or bracket: not a URL we know
            return None
        if parts.scheme not in ("http", "https", "ssh", "git", "git+ssh"):
            return None
        path = parts.path
    path = path.strip().strip("/").removesuffix(".git").strip("/").lower()
    path = path.removeprefix("scm/")
    web = _BITBUCKET_SERVER_WEB.match(path)
    if web:
        path = f"{web.group(1)}/{web.group(2)}"
    if not host or not path:
        return None
    return f"{host.lower()}/{path}"


def repo_identities(spec: RepoSpec) -> set[str]:
    found = {identity(url) for url in (spec.url, spec.display_url, spec.web_url or "")}
    return {name for name in found if name}


def matching_repos(whitelist: Whitelist, push: Push) -> list[RepoSpec]:
    """The entries the push is about: by URL, else by full name on a host the push names."""
    named = {name for name in (identity(url) for url in push.urls) if name}
    by_url = [spec for spec in whitelist.repos if repo_identities(spec) & named]
    if by_url or not push.full_name:
        return by_url
    hosts = {name.split("/", 1)[0] for name in named}
    full_name = push.full_name.strip().strip("/").lower()
    return [
        spec
        for spec in whitelist.repos
        if any(
            path == full_name and (not hosts or host in hosts)
            for host, _, path in (name.partition("/") for name in repo_identities(spec))
        )
    ]


def tracked_commit(spec: RepoSpec, push: Push) -> str | None:
    """The new commit of the branch the entry follows, if the push moved it. An entry without a
    `branch` follows the remote's default branch: the one the payload names, else any branch
    (a refresh that finds nothing new is cheap)."""
    tracked = spec.branch or push.default_branch
    for branch, sha in push.moved:
        if tracked is None or branch == tracked:
            return sha
    return None
