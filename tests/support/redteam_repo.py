"""A hostile history for the red-team suite: every way around redaction the attackers of issue 19
found, committed with real git.

Commits, oldest first (tests/support/history_repo.py gives each a day and an author):

    start     README.md, src/app.py, config.yaml (a password the redactor finds by its key)
    settings  .env (a marker no rule detects), config/service.pem (another), .env.py (a
              function whose name is a marker), keys/deploy.txt (a private key: withheld by content)
    rename    `git mv .env config.defaults` and `git mv .env.py settings_loader.py`: blobs unchanged
    reword    `git mv config/service.pem config/service.txt` and one line added, in one commit
    next      one more line in config/service.txt (its old lines are this commit's context)
    trim      keys/deploy.txt renamed to keys/deploy-notes.md without its BEGIN and END lines
    token     a commit message holding a GitHub token; the symlink defaults.link -> config.defaults
    utf16     a commit whose message is UTF-16 (an `encoding` header) holding another token

Values are assembled at run time, so this file holds no whole secret.
"""

from __future__ import annotations

import base64
import random
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.history_repo import AUTHORS, HistoryRepo

_ALNUM = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"


@dataclass
class RedTeam:
    repo: HistoryRepo
    env_marker: str  # in .env, then config.defaults
    pem_marker: str  # in config/service.pem, then config/service.txt (edited)
    function: str  # a function defined in .env.py, then settings_loader.py
    password: str  # config.yaml, redacted by its key
    token: str  # in the message of commit "token"
    key_lines: list[str]  # the body of keys/deploy.txt
    utf16_token: str  # in the UTF-16 message of commit "utf16"

    @property
    def secrets(self) -> list[str]:
        return [self.env_marker, self.pem_marker, self.function, self.password, self.token, self.utf16_token,
                *self.key_lines]  # fmt: skip


def _word(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(_ALNUM) for _ in range(length))


def build_redteam_repo(root: Path) -> RedTeam:
    rng = random.Random(19)
    repo = HistoryRepo(root / "work", root / "remote.git")
    repo.work.mkdir(parents=True)
    repo.git("init", "-q", "-b", "main")
    team = RedTeam(
        repo,
        env_marker="envmarker" + _word(rng, 16),
        pem_marker="pemmarker" + _word(rng, 16),
        function="envfunction" + _word(rng, 12),
        password="hunter2" + _word(rng, 14),
        token="ghp" + "_" + _word(rng, 36),
        utf16_token="ghp" + "_" + _word(rng, 36),
        key_lines=[base64.b64encode(rng.randbytes(48)).decode() for _ in range(12)],
    )
    begin, end = "-----" + "BEGIN OPENSSH PRIVATE KEY-----", "-----" + "END OPENSSH PRIVATE KEY-----"
    repo.commit("start", "Ada", "Start the app",
                {"README.md": "# app\n", "src/app.py": "def main():\n    return 1\n",
                 "config.yaml": f"db:\n  host: localhost\n  password: {team.password}\n"})  # fmt: skip
    repo.commit("settings", "Grace", "Add local settings",
                {".env": f"FAVORITE={team.env_marker}\n", "config/service.pem": f"{team.pem_marker}\nline two\n",
                 ".env.py": f"def {team.function}():\n    return 'local'\n",
                 "keys/deploy.txt": "\n".join([begin, *team.key_lines, end]) + "\n"})  # fmt: skip
    repo.commit("rename", "Grace", "Keep the defaults", {},
                renames={".env": "config.defaults", ".env.py": "settings_loader.py"})  # fmt: skip
    repo.git("mv", "config/service.pem", "config/service.txt")
    repo.commit("reword", "Grace", "Describe the service",
                {"config/service.txt": f"{team.pem_marker}\nline two\nline three\n"})  # fmt: skip
    repo.commit("next", "Alan", "One more line",
                {"config/service.txt": f"{team.pem_marker}\nline two\nline three\nline four\n"})  # fmt: skip
    repo.git("mv", "keys/deploy.txt", "keys/deploy-notes.md")
    repo.commit(
        "trim", "Alan", "Keep the key as notes", {"keys/deploy-notes.md": "\n".join(team.key_lines) + "\n"}
    )
    (repo.work / "defaults.link").symlink_to("config.defaults")
    repo.git("add", "defaults.link")
    repo.commit("token", "Ada", f"Rotate the deploy token\n\nThe new one is {team.token} for now.", {})
    utf16_commit(repo, "utf16", f"Use the backup token {team.utf16_token}\n")
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(repo.bare)], check=True)
    repo.git("push", "-q", str(repo.bare), "main")
    return team


def utf16_commit(repo: HistoryRepo, name: str, message: str) -> None:
    """A commit whose message is UTF-16 with an `encoding` header (git itself never writes one,
    an attacker's tool can): made with hash-object, as such a tool would."""
    tree = repo.git("write-tree")
    parent = repo.git("rev-parse", "HEAD")
    person = AUTHORS["Alan"].encode() + b" 1704456000 +0000"
    raw = (
        b"tree " + tree.encode() + b"\nparent " + parent.encode() + b"\nauthor " + person
        + b"\ncommitter " + person + b"\nencoding UTF-16\n\n" + message.encode("utf-16")
    )  # fmt: skip
    done = subprocess.run(
        ["git", "hash-object", "-t", "commit", "-w", "--stdin", "--literally"],
        cwd=repo.work, input=raw, capture_output=True, check=True,
    )  # fmt: skip
    sha = done.stdout.decode().strip()
    repo.git("update-ref", "HEAD", sha)
    repo.shas[name] = sha
