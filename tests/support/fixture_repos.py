"""Real git repos and real snapshots for tool tests, and a hostile corpus to attack them with.

Snapshots are made the way production makes them (worker.repos.assemble.build_snapshot: every
blob processed and redacted, the tree assembled from the processed store), from the work repo's
own .git. A snapshot at `<base>/snapshots/<name>` keeps its index at `<base>/manifests/` and its
processed blobs in `<base>/data/blobs/`, as the mirrors lay them out. Planted secrets are
assembled at run time from pieces so that this source file itself holds no complete secret for
a scanner to flag.
"""

from __future__ import annotations

import base64
import os
import random
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from config.repos import RepoSpec
from config.settings import Settings, load_settings
from worker.repos.assemble import build_snapshot
from worker.repos.snapshot import Snapshot
from worker.repos.symbols import index_path
from worker.tools import make_context
from worker.tools.context import ToolContext

_IDENTITY = ("-c", "user.name=codebot tests", "-c", "user.email=tests@codebot.invalid")
_cache: dict[str, Corpus] = {}


def git(cwd: Path, *args: str) -> str:
    # The identity is passed explicitly: session-scoped fixtures run before conftest's env setup.
    done = subprocess.run(["git", *_IDENTITY, *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def make_repo(
    path: Path, files: Mapping[str, str | bytes], links: Mapping[str, str] | None = None, branch: str = "main"
) -> str:
    """A git repo at `path` with one commit of `files` and symlinks `links` (path -> target); its sha.
    An existing repo at `path` gets one more commit (the tests' one git-repo builder)."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    git(path, "config", "core.symlinks", "true")
    for relative, content in files.items():
        target = path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    for relative, destination in (links or {}).items():
        (path / relative).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(destination, path / relative)
    git(path, "add", "-A", "--force")  # --force: commit .gitignored files too, as real repos do
    git(path, "commit", "-q", "-m", "fixture")
    return git(path, "rev-parse", "HEAD")


def snapshot_repo(
    repo_dir: Path, name: str, root: Path, description: str = "", settings: Settings | None = None
) -> Snapshot:
    """Make the snapshot of HEAD of `repo_dir` at `root` (`<base>/snapshots/<name>`), as the mirrors do."""
    sha = git(repo_dir, "rev-parse", "HEAD")
    branch = git(repo_dir, "rev-parse", "--abbrev-ref", "HEAD")
    committed = float(git(repo_dir, "log", "-1", "--format=%ct"))
    root.mkdir(parents=True)
    settings = settings or load_settings(env_file=None, data_dir=root.parent.parent / "data")
    built = build_snapshot(settings, repo_dir / ".git", sha, root, index_path(root), name, lambda *_: None)
    spec = RepoSpec(
        name=name, url=str(repo_dir), display_url=str(repo_dir), branch=branch, description=description
    )
    return Snapshot(
        repo=spec,
        sha=sha,
        branch=branch,
        root=root,
        created_at=time.time(),
        committed_at=committed,
        meta=built.meta,
        git_dir=repo_dir / ".git",  # the work repo's history, for the history tools
    )


def _pem(kind: str, seed: int) -> str:
    """A private-key-shaped PEM block: random base64 body lines, the last one short."""
    body = base64.b64encode(random.Random(seed).randbytes(900)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join([f"-----BEGIN {kind}PRIVATE KEY-----", *lines, f"-----END {kind}PRIVATE KEY-----"])


def _token(
    seed: int, length: int, alphabet: str = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"
) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(length))


@dataclass
class Corpus:
    snapshots: dict[str, Snapshot]
    secrets: list[str] = field(default_factory=list)  # strings that must never appear in output
    pem_source: str = ""  # the PEM block planted inside src/clients.py

    @property
    def app(self) -> Snapshot:
        return self.snapshots["app"]


# Ways out of a snapshot a model (or a prompt injection) might try; encoded forms stay literal.
TRAVERSAL_PATHS = [
    "../",
    "..",
    "../../etc/passwd",
    "..\\..\\etc\\passwd",
    "/etc/passwd",
    "\\etc\\passwd",
    "C:\\Windows",
    "c:/x",
    "a/../../x",
    "src/../../sibling/notes.txt",
    "./../x",
    "src/..",
    "%2e%2e%2fetc%2fpasswd",
    "..%2f..%2fetc%2fpasswd",
    "....//....//etc/passwd",
    "\uff0e\uff0e/etc/passwd",
    "src\x00.py",
    "x" * 5000,
]
HUGE_LINES = 100_000  # big/huge.txt: 100k lines of 52 bytes, about 5 MB
NEEDLE_LINES = 1500  # many.txt: this many lines containing "needle"


def hostile_corpus(base: Path) -> Corpus:
    """Two repos, `app` (hostile) and `sibling`, snapshotted side by side under base/snapshots."""
    aws = "AKIA" + _token(1, 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
    ghp = "ghp" + "_" + _token(2, 36)
    xoxb = "xox" + "b-" + "2741836512-4018362957142-" + _token(3, 24)
    sk_proj = "sk-" + "proj-" + _token(4, 48)
    env_secret = "envfile-" + _token(5, 20)
    pem_source = _pem("RSA ", 6)
    id_rsa = _pem("OPENSSH ", 7)
    server_pem = _pem("", 8)
    sibling_marker = "SIBLING-ONLY-" + _token(9, 12)

    snapshots_dir = base / "snapshots"
    make_repo(base / "repos" / "sibling", {"notes.txt": f"{sibling_marker}\n", "README.md": "# Sibling\n"})
    app_files: dict[str, str | bytes] = {
        "README.md": "# App\n\nA hostile fixture repo.\n\nIt retries jobs.\n",
        # retry_job is on line 4, class Queue on line 8
        "src/app.py": "import os\n\n\ndef retry_job(job):\n    return job.retry()\n\n\nclass Queue:\n"
        "    pass\n",
        "src/clients.py": (
            "import boto3\n\n"
            f'AWS_KEY_ID = "{aws}"\n'
            f'GITHUB_TOKEN = "{ghp}"\n'
            f'SLACK_TOKEN = "{xoxb}"\n'
            f'OPENAI_KEY = "{sk_proj}"\n'
            f'PRIVATE_KEY = """{pem_source}"""\n\n'
            "def client():\n    return boto3.client('s3')\n"
        ),
        "src/数据.py": "数据 = 'unicode path works'\n",
        "docs/überblick.md": "# Überblick\n\nGrüße aus dem Überblick.\n",
        ".env": f"DB_PASSWORD={env_secret}\n",
        "id_rsa": id_rsa + "\n",
        "config/server.pem": server_pem + "\n",
        "config/settings.toml": "[server]\nport = 8080\n",
        ".gitignore": "build/\n*.log\n",
        "build/generated.py": "GITIGNORED_MARKER = 1\n",
        "debug.log": "GITIGNORED_MARKER in a log\n",
        "big/huge.txt": "".join(
            f"line {n:09d} of the huge file, padding padding\n" for n in range(1, HUGE_LINES + 1)
        ),
        "assets/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4,
        "data/latin1.txt": "caf\xe9 cr\xe8me\n".encode("latin-1"),
        "data/long_line.txt": "a" * 60_000 + "!\n",
        "data/empty.txt": "",
        "many.txt": "".join(f"needle {n}\n" for n in range(1, NEEDLE_LINES + 1)),
        "scripts/clean.sh": "#!/bin/sh\nrm -rf ./build\n",
    }
    sibling_root = snapshots_dir / "sibling"
    links = {
        "etc_passwd": "/etc/passwd",
        "docs/passwd_link.md": "../../../../../../../../etc/passwd",
        "sibling_notes": "../sibling/notes.txt",
        "sibling_dir": "../sibling",
        "abs_sibling": str(sibling_root / "notes.txt"),
        "docs/readme-link.md": "../README.md",
        "env_link.txt": ".env",
    }
    make_repo(base / "repos" / "app", app_files, links)
    snapshots = {
        "sibling": snapshot_repo(base / "repos" / "sibling", "sibling", sibling_root, "the sibling repo"),
        "app": snapshot_repo(base / "repos" / "app", "app", snapshots_dir / "app", "a hostile app"),
    }
    pem_bodies = [line for block in (pem_source, id_rsa, server_pem) for line in block.splitlines()[1:-1]]
    secrets = [aws, ghp, xoxb, sk_proj, env_secret, sibling_marker, *pem_bodies]
    return Corpus(snapshots=snapshots, secrets=secrets, pem_source=pem_source)


def shared_corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """One hostile corpus per test session (building it commits a 5 MB file); never modify it."""
    if "corpus" not in _cache:
        _cache["corpus"] = hostile_corpus(tmp_path_factory.mktemp("hostile"))
    return _cache["corpus"]


def context(corpus: Corpus, *names: str, **overrides: Any) -> ToolContext:
    """A fresh question context over some of the corpus's repos (default: only `app`)."""
    settings = load_settings(env_file=None, **overrides)
    return make_context(settings, {name: corpus.snapshots[name] for name in names or ("app",)})


def passwd_lines() -> list[str]:
    """Lines of this machine's /etc/passwd, to prove none ever reaches a tool result."""
    try:
        return [line for line in Path("/etc/passwd").read_text().splitlines() if len(line) >= 8]
    except OSError:
        return []
