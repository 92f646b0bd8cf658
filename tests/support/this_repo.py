"""This checkout as a repo to mirror, with its real history, whatever state the checkout is in.

On a branch, the checkout itself is what the default whitelist mirrors (config/repos.toml: url
".."). On a detached HEAD (some CI checkouts) the mirrors cannot tell which branch to follow, so
a bare copy of the checkout with HEAD as a branch of its own stands in.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COPY_BRANCH = "codebot-under-test"


def git_here(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def current_branch() -> str | None:
    return git_here("symbolic-ref", "-q", "--short", "HEAD") or None


def head() -> str:
    return git_here("rev-parse", "HEAD")


def mirrorable(tmp: Path) -> tuple[Path, str]:
    """(url, branch) that mirror this checkout's committed HEAD with its history."""
    branch = current_branch()
    if branch:
        return ROOT, branch
    copy = tmp / "codebot.git"
    subprocess.run(["git", "clone", "--bare", "--quiet", str(ROOT), str(copy)], check=True)
    subprocess.run(
        ["git", "--git-dir", str(copy), "update-ref", f"refs/heads/{COPY_BRANCH}", head()], check=True
    )
    return copy, COPY_BRANCH


def repos_file(tmp: Path, name: str = "codebot") -> Path:
    """A whitelist of this checkout alone, under `name`."""
    url, branch = mirrorable(tmp)
    path = tmp / "repos.toml"
    path.write_text(f'[[repo]]\nname = "{name}"\nurl = "{url}"\nbranch = "{branch}"\n', encoding="utf-8")
    return path
