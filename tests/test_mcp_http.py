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
        timeout=110,  # a hang guard: the CLI's imports take 40-60 s at load 20
    )

    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "codebot: CODEBOT_MCP_TOKEN: set a bearer token to serve MCP over HTTP (e.g. `openssl rand -hex 32`); "
        "clients send it as `Authorization: Bearer <token>`"
    ]


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
JSON_RPC_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_the_bearer_scheme_is_accepted_in_any_case(url: str) -> None:
    for scheme in ("bearer", "BEARER", "Bearer"):
        headers = {**JSON_RPC_HEADERS, "Authorization": f"{scheme} {TOKEN}"}
        assert httpx2.post(url, json=INITIALIZE, headers=headers).status_code == 200


def test_an_unknown_tool_is_a_json_rpc_invalid_params_error(url: str) -> None:
    with http_client_for(url, TOKEN) as client, pytest.raises(MCPError) as refused:
        client.call(client.session.call_tool, "delete_everything", {})
    assert refused.value.code == -32602 and "Unknown tool: delete_everything" in refused.value.message


def test_a_reverse_proxys_public_host_is_refused_until_it_is_allowed(served: Served, url: str) -> None:
    headers = {**JSON_RPC_HEADERS, "Authorization": f"Bearer {TOKEN}", "Host": "codebot.example.com"}
    refused = httpx2.post(url, json=INITIALIZE, headers=headers)
    assert refused.status_code == 421 and "Invalid Host header" in refused.text
    with http_server(served, TOKEN, CODEBOT_MCP_ALLOWED_HOSTS='["codebot.example.com"]') as allowed_url:
        assert httpx2.post(allowed_url, json=INITIALIZE, headers=headers).status_code == 200
        evil = {**headers, "Host": "evil.example"}
        assert httpx2.post(allowed_url, json=INITIALIZE, headers=evil).status_code == 421
