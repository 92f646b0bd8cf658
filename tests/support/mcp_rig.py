"""A synced repo and the environment for a real `codebot mcp` subprocess, and a blocking MCP client.

The client is the official MCP Python SDK (ClientSession over stdio_client or
streamable_http_client), driven from synchronous tests through an anyio blocking portal.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx2
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from codebot.wiring import build_runtime
from config.settings import load_settings
from tests.support.e2e import DEFAULT_FILES
from tests.support.fixture_repos import make_repo
from tests.support.model_server import ScriptedModel

PROJECT_ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


@dataclass
class Served:
    """The `payments` repo synced under `root/data`, and what a server process needs to serve it."""

    root: Path
    sha: str
    model: ScriptedModel

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "CODEBOT_DATA_DIR": str(self.root / "data"),
            "CODEBOT_REPOS_FILE": str(self.root / "repos.toml"),
            "OPENAI_BASE_URL": self.model.base_url,
            "OPENAI_API_KEY": "test-key",
            "CODEBOT_MODEL_MAX_RETRIES": "0",
            "PYTHONPATH": str(PROJECT_ROOT),
            **extra,
        }


@contextmanager
def served_repo(root: Path, files: dict[str, str] | None = None) -> Iterator[Served]:
    """`payments` synced under `root/data`, holding `files` (default: the e2e payments service)."""
    sha = make_repo(root / "payments-src", files if files is not None else DEFAULT_FILES)
    (root / "repos.toml").write_text(
        f'[[repo]]\nname = "payments"\nurl = "{root / "payments-src"}"\n'
        'web_url = "https://github.com/acme/payments"\ndescription = "the payments service"\n',
        encoding="utf-8",
    )
    settings = load_settings(env_file=None, data_dir=root / "data", repos_file=root / "repos.toml")
    assert build_runtime(settings).mirrors.sync("payments").ok
    model = ScriptedModel()
    try:
        yield Served(root, sha, model)
    finally:
        model.close()


class Client:
    """One MCP session, called from sync code: `client.call(session.list_tools)`."""

    def __init__(self, portal: BlockingPortal, session: ClientSession) -> None:
        self.portal = portal
        self.session = session

    def call(self, function: Callable[..., Awaitable[T]], *args: Any) -> T:
        return self.portal.call(function, *args)

    def tool(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """(the result's text, whether it is an error)."""
        result = self.portal.call(self.session.call_tool, name, arguments)
        return "".join(getattr(block, "text", "") for block in result.content), result.is_error


@asynccontextmanager
async def _stdio_session(served: Served) -> AsyncIterator[ClientSession]:
    command = [sys.executable, "-m", "codebot.cli", "mcp"]
    params = StdioServerParameters(
        command=command[0], args=command[1:], env=served.env(), cwd=str(served.root)
    )
    with open(served.root / "mcp-stderr.log", "w") as errors:
        async with (
            stdio_client(params, errlog=errors) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


@asynccontextmanager
async def _http_session(url: str, token: str | None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@contextmanager
def stdio_client_for(served: Served) -> Iterator[Client]:
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_stdio_session(served)) as session,
    ):
        yield Client(portal, session)


@contextmanager
def http_client_for(url: str, token: str | None) -> Iterator[Client]:
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_http_session(url, token)) as session,
    ):
        yield Client(portal, session)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_server(served: Served, token: str, **extra_env: str) -> Iterator[str]:
    """`codebot mcp --http` in a subprocess; yields its URL once it accepts connections."""
    port = free_port()
    env = {**os.environ, **served.env(CODEBOT_MCP_TOKEN=token, **extra_env)}
    command = [sys.executable, "-m", "codebot.cli", "mcp", "--http", "--port", str(port)]
    with open(served.root / "mcp-http.log", "w") as log:
        process = subprocess.Popen(
            command, cwd=served.root, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
        try:
            # up once it accepts a connection, however long a busy machine takes to start it
            deadline = time.monotonic() + 120  # a hang guard: never yield a server not yet up
            while True:
                assert process.poll() is None, (served.root / "mcp-http.log").read_text()
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        break
                assert time.monotonic() < deadline, "codebot mcp --http never accepted a connection"
                time.sleep(0.05)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            process.terminate()
            process.wait(timeout=10)
