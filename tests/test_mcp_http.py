"""`codebot mcp --http`: streamable HTTP behind a bearer token, with the official MCP client."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import MCPError

from tests.support.mcp_rig import Served, http_client_for, http_server, served_repo
from worker.tools import build_registry

TOKEN = "test-token-0123456789abcdef"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_repo(tmp_path_factory.mktemp("mcp-http")) as served:
        yield served


@pytest.fixture(scope="module")
def url(served: Served) -> Iterator[str]:
    with http_server(served, TOKEN) as url:
        yield url


def test_with_the_token_a_client_lists_the_tools_and_searches(url: str) -> None:
    with http_client_for(url, TOKEN) as client:
        listed = client.call(client.session.list_tools).tools
        found, error = client.tool("search", {"pattern": "def retry"})

    assert [tool.name for tool in listed] == [*build_registry().names(), "ask"]
    assert not error and "payments:payments/retry.py\n      6│ def retry(" in found


def test_without_the_token_or_with_a_wrong_one_the_client_is_refused(url: str) -> None:
    for token in (None, "wrong-token-0123456789abcdef"):
        with pytest.raises(ExceptionGroup) as refused, http_client_for(url, token):
            pass
        assert refused.group_contains(MCPError, match="error response", depth=None)

    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        plain = httpx2.post(url, json=listing, headers=headers)
        assert plain.status_code == 401 and plain.headers["www-authenticate"].startswith("Bearer")


def test_http_refuses_to_start_without_a_token_with_one_clear_line(served: Served, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "codebot.cli", "mcp", "--http", "--port", "1"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", **served.env()},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "codebot: CODEBOT_MCP_TOKEN: set a bearer token to serve MCP over HTTP (e.g. `openssl rand -hex 32`); "
        "clients send it as `Authorization: Bearer <token>`"
    ]
