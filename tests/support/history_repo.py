"""A repo with a history worth asking about, mirrored as production mirrors it, for the history tools.

Commits, oldest first, one a day from 2024-01-01 (authors vary, for log and blame):

    add      Ada    Add retry with exponential backoff      src/retry.py, src/clients.py (a key and an
                                                            AWS key inside code), README.md; tag v1.0
    secrets  Grace  Add local settings                      .env and config/deploy.pem (secret names,
                                                            markers no rule detects), keys/service.txt
                                                            (a private key: withheld by content)
    raise    Alan   Raise MAX_ATTEMPTS to 5 for flaky ...   src/retry.py line 3; one line in the middle
                                                            of the key in src/clients.py; tag v2.0
    remove   Grace  Remove local settings and keys          deletes .env and keys/service.txt; renames
                                                            config/deploy.pem to config/deploy-old.txt
    tidy     Ada    Tidy the README                         deletes config/deploy-old.txt
    jitter   Alan   Add jitter to the backoff               on branch feature
    merge    Ada    Merge feature: jitter                   a merge commit, the branch's tip

Planted values are assembled at run time, so this file holds no whole secret.
"""

from __future__ import annotations

import base64
import os
import random
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.settings import Settings
from tests.support.git_remote import make_mirrors
from worker.repos.snapshot import Snapshot
from worker.tools import make_context
from worker.tools.context import ToolContext

AUTHORS = {
    "Ada": "Ada Lovelace <ada@example.invalid>",
    "Grace": "Grace Hopper <grace@example.invalid>",
    "Alan": "Alan Turing <alan@example.invalid>",
}


def _token(rng: random.Random, length: int) -> str:
    return "".join(
        rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789") for _ in range(length)
    )


def _key_lines(rng: random.Random) -> list[str]:
    body = base64.b64encode(rng.randbytes(700)).decode()
    return [body[i : i + 64] for i in range(0, len(body), 64)]


def retry_source(attempts: int, jitter: bool = False) -> str:
    sleep = "backoff * 2**attempt + random.random()" if jitter else "backoff * 2**attempt"
    return (
        "import random\nimport time\n"
        f"MAX_ATTEMPTS = {attempts}\n\n\n"
        "def retry(call, attempts=MAX_ATTEMPTS, backoff=0.5):\n"
        "    for attempt in range(attempts):\n"
        "        try:\n"
        "            return call()\n"
        "        except ConnectionError:\n"
        f"            time.sleep({sleep})\n"
        "    raise RuntimeError('gave up')\n"
    )


def clients_source(key: list[str], aws: str) -> str:
    begin, end = "-----" + "BEGIN RSA PRIVATE KEY-----", "-----" + "END RSA PRIVATE KEY-----"
    block = "\n".join([begin, *key, end])
    return f'import boto3\n\nAWS_KEY_ID = "{aws}"\nSIGNING_KEY = """{block}"""\n\n\ndef client():\n    return 1\n'


@dataclass
class HistoryRepo:
    work: Path
    bare: Path
    shas: dict[str, str] = field(default_factory=dict)  # commit name (above) -> sha
    secrets: list[str] = field(default_factory=list)  # what must never come out of a history tool
    secret_names: list[str] = field(default_factory=list)  # file names that must never be named

    def git(self, *args: str, author: str | None = None) -> str:
        """git in the work tree; commits get a day of their own (2024-01-01, -02, …) and `author`."""
        env = {**os.environ}
        if author:
            name, email = author[:-1].split(" <")
            day = f"2024-01-{len(self.shas) + 1:02d}T12:00:00+00:00"
            env.update(GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email, GIT_COMMITTER_NAME=name,
                       GIT_COMMITTER_EMAIL=email, GIT_AUTHOR_DATE=day, GIT_COMMITTER_DATE=day)  # fmt: skip
        done = subprocess.run(
            ["git", *args], cwd=self.work, capture_output=True, text=True, check=True, env=env
        )
        return done.stdout.strip()

    def commit(
        self,
        name: str,
        who: str,
        message: str,
        files: dict[str, str | None],
        renames: dict[str, str] | None = None,
    ) -> None:
        for old, new in (renames or {}).items():
            self.git("mv", old, new)
        for path, text in files.items():
            target = self.work / path
            if text is None:
                self.git("rm", "-q", path)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            self.git("add", "--force", path)
        self.git("commit", "-q", "-m", message, author=AUTHORS[who])
        self.shas[name] = self.git("rev-parse", "HEAD")


def build_history_repo(root: Path) -> HistoryRepo:
    rng = random.Random(15)
    repo = HistoryRepo(root / "work", root / "remote.git")
    repo.work.mkdir(parents=True)
    repo.git("init", "-q", "-b", "main")
    key = _key_lines(rng)
    aws = "AKIA" + "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16))
    env_marker = "envmarker" + _token(rng, 16)
    pem_marker = "pemmarker" + _token(rng, 16)
    service_key = _key_lines(rng)
    service = "\n".join(
        ["-----" + "BEGIN OPENSSH PRIVATE KEY-----", *service_key, "-----" + "END OPENSSH PRIVATE KEY-----"]
    )
    repo.secrets = [aws, env_marker, pem_marker, *key, *service_key]
    repo.secret_names = [".env", "deploy.pem"]

    repo.commit("add", "Ada", "Add retry with exponential backoff\n\nCalls are retried with a doubling sleep.",
                {"src/retry.py": retry_source(3), "src/clients.py": clients_source(key, aws),
                 "README.md": "# app\n\nRetries calls.\n"})  # fmt: skip
    repo.git("tag", "-a", "-m", "first release", "v1.0")
    repo.commit("secrets", "Grace", "Add local settings",
                {".env": f"FAVORITE={env_marker}\n", "config/deploy.pem": f"{pem_marker}\n",
                 "keys/service.txt": service + "\n"})  # fmt: skip
    rotated = [*key]
    rotated[5] = _key_lines(rng)[5]
    repo.secrets.append(rotated[5])
    repo.commit("raise", "Alan", "Raise MAX_ATTEMPTS to 5 for flaky networks\n\nThe payment gateway drops one call in twenty.",
                {"src/retry.py": retry_source(5), "src/clients.py": clients_source(rotated, aws)})  # fmt: skip
    repo.git("tag", "v2.0")
    repo.commit("remove", "Grace", "Remove local settings and keys", {".env": None, "keys/service.txt": None},
                renames={"config/deploy.pem": "config/deploy-old.txt"})  # fmt: skip
    repo.commit(
        "tidy",
        "Ada",
        "Tidy the README",
        {"config/deploy-old.txt": None, "README.md": "# app\n\nRetries flaky calls.\n"},
    )
    repo.git("switch", "-q", "-c", "feature")
    repo.commit("jitter", "Alan", "Add jitter to the backoff", {"src/retry.py": retry_source(5, jitter=True)})
    repo.git("switch", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "-m", "Merge feature: jitter", "feature", author=AUTHORS["Ada"])
    repo.shas["merge"] = ""  # its day comes after the others'
    repo.git(
        "commit", "-q", "--amend", "--no-edit", "--date=2024-01-08T12:00:00+00:00", author=AUTHORS["Ada"]
    )
    repo.shas["merge"] = repo.git("rev-parse", "HEAD")
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(repo.bare)], check=True)
    # As GitHub and GitLab serve: a windowed mirror's lineage.git is then blobless, as in production
    subprocess.run(
        ["git", "--git-dir", str(repo.bare), "config", "uploadpack.allowFilter", "true"], check=True
    )
    repo.git("push", "-q", "--tags", str(repo.bare), "main")
    return repo


@dataclass
class Mirrored:
    repo: HistoryRepo
    settings: Settings
    snapshot: Snapshot

    def context(self, **overrides: Any) -> ToolContext:
        settings = self.settings.model_copy(update=overrides) if overrides else self.settings
        return make_context(settings, {"app": self.snapshot})


@contextmanager
def mirrored(repo: HistoryRepo, root: Path, **settings: Any) -> Iterator[Mirrored]:
    """The repo synced by real Mirrors under `root`, its snapshot leased while the block runs."""
    entry: dict[str, Any] = {"name": "app", "url": str(repo.bare), "branch": "main",
                             "web_url": "https://github.com/acme/app"}  # fmt: skip
    mirrors = make_mirrors(root, [entry], **settings)
    result = mirrors.sync("app")
    assert result.ok, result.error
    with ExitStack() as stack:
        snapshots = stack.enter_context(mirrors.lease(["app"]))
        yield Mirrored(repo, mirrors.settings, snapshots["app"])
