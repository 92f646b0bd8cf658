"""Links to a file's lines at a commit, and to a commit, in each forge's own URL shapes.

The forge is the repo's `forge` key in repos.toml, else inferred from its web URL's host
(config/repos.py); an unknown forge gets GitHub's shapes, which many forges also serve.

| forge | file lines at a commit | commit |
|---|---|---|
| github | `/blob/<sha>/<path>#L12-L30` | `/commit/<sha>` |
| gitlab | `/-/blob/<sha>/<path>#L12-30` | `/-/commit/<sha>` |
| bitbucket | `/src/<sha>/<path>#lines-12:30` | `/commits/<sha>` |
| gitea, forgejo | `/src/commit/<sha>/<path>#L12-L30` | `/commit/<sha>` |
| azure | `?path=/<path>&version=GC<sha>&line=12&lineEnd=30&…` | `/commit/<sha>` |
"""

from __future__ import annotations

from urllib.parse import quote

from config.repos import RepoSpec


def file_url(repo: RepoSpec, sha: str, path: str, start: int, end: int) -> str | None:
    """The web URL of lines start..end of `path` at commit `sha`, or None without a web URL."""
    web = repo.web_url
    if not web:
        return None
    quoted = quote(path, safe="/")
    forge = repo.forge
    if forge == "gitlab":
        lines = f"L{start}" if start == end else f"L{start}-{end}"
        return f"{web}/-/blob/{sha}/{quoted}#{lines}"
    if forge == "bitbucket":
        lines = f"lines-{start}" if start == end else f"lines-{start}:{end}"
        return f"{web}/src/{sha}/{quoted}#{lines}"
    if forge == "azure":
        return (
            f"{web}?path={quote('/' + path, safe='/')}&version=GC{sha}&line={start}&lineEnd={end}"
            "&lineStartColumn=1&lineEndColumn=1&lineStyle=plain&_a=contents"
        )
    lines = f"L{start}" if start == end else f"L{start}-L{end}"
    if forge in ("gitea", "forgejo"):
        return f"{web}/src/commit/{sha}/{quoted}#{lines}"
    return f"{web}/blob/{sha}/{quoted}#{lines}"  # GitHub, also for unknown forges


def commit_url(repo: RepoSpec, sha: str) -> str | None:
    """The web URL of commit `sha`, or None without a web URL."""
    web = repo.web_url
    if not web:
        return None
    if repo.forge == "gitlab":
        return f"{web}/-/commit/{sha}"
    if repo.forge == "bitbucket":
        return f"{web}/commits/{sha}"
    return f"{web}/commit/{sha}"  # GitHub, Gitea, Forgejo, Azure DevOps, and unknown forges
