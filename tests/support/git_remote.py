"""Real git for tests: a work repo pushing to a bare "remote", and Mirrors pointed at it.

Everything runs the real `git` binary in tmp dirs (tests/conftest.py gives each test a git
identity and a clean environment). `serve_git_http` serves bare repos over smart HTTP with
Basic auth (git http-backend as CGI), for the private-repo tests.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from config.repos import Whitelist, load_whitelist
from config.settings import load_settings
from tests.support.fixture_repos import make_repo
from worker.repos.mirrors import Mirrors

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


@dataclass
class GitRemote:
    """A work tree at `work` whose `origin` is the bare repo at `bare` (what mirrors fetch)."""

    work: Path
    bare: Path
    branch: str

    @classmethod
    def create(cls, root: Path, branch: str = "main", files: dict[str, str] | None = None) -> GitRemote:
        root.mkdir(parents=True, exist_ok=True)
        remote = cls(root / "work", root / "remote.git", branch)
        git("init", "--bare", "--quiet", f"--initial-branch={branch}", str(remote.bare))
        # As GitHub and GitLab serve: a windowed mirror's lineage.git is then blobless, as in production
        git("--git-dir", str(remote.bare), "config", "uploadpack.allowFilter", "true")
        make_repo(
            remote.work, files or {"README.md": "# demo\n", "src/app.py": "print('v1')\n"}, branch=branch
        )
        git("remote", "add", "origin", str(remote.bare), cwd=remote.work)
        git("push", "--quiet", "origin", branch, cwd=remote.work)
        return remote

    def commit(self, files: Mapping[str, str | None], message: str = "edit", branch: str = "") -> str:
        """Write (or, for None, delete) files, commit them on `branch` and push; the new sha."""
        branch = branch or self.branch
        known = git("branch", "--list", branch, cwd=self.work)
        git("switch", "--quiet", *([] if known else ["-c"]), branch, cwd=self.work)
        for path, text in files.items():
            target = self.work / path
            if text is None:
                target.unlink()
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
        git("add", "--all", cwd=self.work)
        git("commit", "--quiet", "--allow-empty", "-m", message, cwd=self.work)
        git("push", "--quiet", "origin", branch, cwd=self.work)
        return self.sha(branch)

    def force_push_replacing_last_commit(self, files: Mapping[str, str], message: str = "rewritten") -> str:
        """Drop the tip of the branch, commit something else in its place, force-push it."""
        git("switch", "--quiet", self.branch, cwd=self.work)
        git("reset", "--quiet", "--hard", "HEAD~1", cwd=self.work)
        for path, text in files.items():
            (self.work / path).write_text(text, encoding="utf-8")
        git("add", "--all", cwd=self.work)
        git("commit", "--quiet", "-m", message, cwd=self.work)
        git("push", "--quiet", "--force", "origin", self.branch, cwd=self.work)
        return self.sha()

    def delete_branch(self, branch: str) -> None:
        git("--git-dir", str(self.bare), "config", "receive.denyDeleteCurrent", "ignore")
        git("push", "--quiet", "origin", "--delete", branch, cwd=self.work)

    def set_default_branch(self, branch: str) -> None:
        git("--git-dir", str(self.bare), "symbolic-ref", "HEAD", f"refs/heads/{branch}")

    def sha(self, branch: str | None = None) -> str:
        return git("--git-dir", str(self.bare), "rev-parse", f"refs/heads/{branch or self.branch}")


def write_whitelist(root: Path, entries: list[dict[str, Any]]) -> Whitelist:
    """Write `root/repos.toml` with one [[repo]] per entry and load it as the app does."""
    lines: list[str] = []
    for entry in entries:
        lines.append("[[repo]]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in entry.items()]
        lines.append("")
    root.mkdir(parents=True, exist_ok=True)
    path = root / "repos.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return load_whitelist(path)


def make_mirrors(root: Path, entries: list[dict[str, Any]], **settings: Any) -> Mirrors:
    """Mirrors over `root/data`, whitelisting `entries` (name, url, optional branch, ...)."""
    whitelist = write_whitelist(root, entries)
    return Mirrors(load_settings(env_file=None, data_dir=root / "data", **settings), whitelist)


def mirrors_for(root: Path, remote: GitRemote, name: str = "app", **settings: Any) -> Mirrors:
    return make_mirrors(root, [{"name": name, "url": str(remote.bare), "branch": remote.branch}], **settings)


def mirrors_of(root: Path, remotes: dict[str, GitRemote]) -> Mirrors:
    """Mirrors of several repos by name, each following its remote's default branch."""
    return make_mirrors(root, [{"name": name, "url": str(remote.bare)} for name, remote in remotes.items()])


def snapshot_entries(mirrors: Mirrors, name: str = "app") -> list[str]:
    """What is in the repo's snapshots folder; one served snapshot is [sha, sha.blobs, sha.json, sha.lock]."""
    return sorted(path.name for path in (mirrors.root / name / "snapshots").iterdir())


def start_python(code: str, *args: str) -> subprocess.Popen[str]:
    """Run `code` in a fresh interpreter that can import the project; stdout is a text pipe."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    command = [sys.executable, "-c", code, *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


# Prints the sha it leased, then holds the lease until killed: argv = data_dir, repos file, name.
LEASE_HOLDER = """
import sys, time
from pathlib import Path
from config.repos import load_whitelist
from config.settings import load_settings
from worker.repos.mirrors import Mirrors
mirrors = Mirrors(load_settings(env_file=None, data_dir=Path(sys.argv[1])), load_whitelist(Path(sys.argv[2])))
with mirrors.lease([sys.argv[3]]) as snapshots:
    print(snapshots[sys.argv[3]].sha, flush=True)
    time.sleep(600)
"""

# Syncs one repo and prints the SyncResult as JSON: argv = data_dir, repos file, name.
SYNCER = """
import dataclasses, json, sys
from pathlib import Path
from config.repos import load_whitelist
from config.settings import load_settings
from worker.repos.mirrors import Mirrors
mirrors = Mirrors(load_settings(env_file=None, data_dir=Path(sys.argv[1])), load_whitelist(Path(sys.argv[2])))
print(json.dumps(dataclasses.asdict(mirrors.sync(sys.argv[3]))), flush=True)
"""


@contextmanager
def serve_git_http(project_root: Path, user: str, password: str) -> Iterator[str]:
    """Serve the bare repos under `project_root` over smart HTTP with Basic auth; yields the base URL."""
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._backend()

        def do_POST(self) -> None:
            self._backend()

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _backend(self) -> None:
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path, _, query = self.path.partition("?")
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            env = {
                **os.environ,
                "GIT_PROJECT_ROOT": str(project_root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "REQUEST_METHOD": self.command,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                "HTTP_GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                "REMOTE_USER": user,
            }
            out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
            blank = re.search(rb"\r?\n\r?\n", out)
            head, payload = (out[: blank.start()], out[blank.end() :]) if blank else (out, b"")
            status, headers = 200, []
            for line in head.decode().splitlines():
                key, _, value = line.partition(":")
                if key.lower() == "status":
                    status = int(value.split()[0])
                else:
                    headers.append((key, value.strip()))
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def silent_server() -> Iterator[str]:
    """An http:// URL whose server accepts connections and never answers (a hung remote)."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        with suppress(OSError):
            while True:
                held.append(listener.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hung.git"
    finally:
        listener.close()
        for connection in held:
            connection.close()
