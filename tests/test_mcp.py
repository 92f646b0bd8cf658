"""`codebot mcp` over stdio, driven by the official MCP Python client against a real subprocess."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.mcp_rig import Client, Served, served_repo, stdio_client_for
from tests.support.model_server import text, tool_calls
from worker.tools import build_registry


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_repo(tmp_path_factory.mktemp("mcp")) as served:
        yield served


@pytest.fixture(scope="module")
def client(served: Served) -> Iterator[Client]:
    with stdio_client_for(served) as client:
        yield client


def test_the_tools_listed_are_the_registry_tools_then_ask_all_read_only(client: Client) -> None:
    listed = client.call(client.session.list_tools).tools

    assert [tool.name for tool in listed] == [*build_registry().names(), "ask"]
    assert all(tool.annotations and tool.annotations.read_only_hint for tool in listed)
    search = next(tool for tool in listed if tool.name == "search")
    assert search.input_schema["required"] == ["pattern"]
    assert "ripgrep" in (search.description or "")


def test_a_search_returns_the_real_matching_lines(client: Client) -> None:
    found, error = client.tool("search", {"pattern": "MAX_ATTEMPTS", "repo": "payments"})

    assert not error
    assert found.startswith("2 matching line(s) for 'MAX_ATTEMPTS' in repo payments:")
    assert "payments:payments/retry.py\n      3│ MAX_ATTEMPTS = 5" in found
    assert "6│ def retry(call, attempts=MAX_ATTEMPTS, backoff=0.5):" in found


def test_a_search_that_matches_nothing_is_a_result_not_an_error(client: Client) -> None:
    found, error = client.tool("search", {"pattern": "NO_SUCH_NAME_ANYWHERE", "repo": "payments"})
    assert not error
    assert found.startswith("No matches for 'NO_SUCH_NAME_ANYWHERE' in repo payments")


def test_a_path_leaving_the_repo_is_refused_as_a_tool_error(client: Client) -> None:
    for path in ("../../../etc/passwd", "/etc/passwd", "payments/../../x"):
        reply, error = client.tool("read_file", {"repo": "payments", "path": path})
        assert error and reply.startswith("Error: ") and "root:" not in reply


def test_a_planted_secret_is_redacted_and_a_secret_file_is_refused(client: Client) -> None:
    settings, error = client.tool("read_file", {"repo": "payments", "path": "payments/settings.py"})
    env, env_error = client.tool("read_file", {"repo": "payments", "path": ".env"})
    searched, _ = client.tool("search", {"pattern": "AKIA|sk_live"})

    assert not error and "AKIAQWERTYUIOPASDFGHJ" not in settings and "[REDACTED" in settings
    assert 'REGION = "eu-west-1"' in settings
    assert env_error and "matches secret file pattern" in env and "sk_live" not in env
    assert "AKIAQWERTYUIOPASDFGHJ" not in searched and "planted" not in searched


def test_code_navigation_answers_over_mcp(client: Client) -> None:
    found, error = client.tool("find_definition", {"symbol": "retry"})

    assert not error and "function retry (Python), lines 6-13" in found
    missing, missing_error = client.tool("find_references", {"symbol": "no_such_name"})
    assert missing_error and "no definition of 'no_such_name'" in missing


def test_ask_runs_the_agent_and_returns_an_answer_with_commit_pinned_links(
    served: Served, client: Client
) -> None:
    served.model.enqueue(
        tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py", "start_line": 6})),
        text("`retry` sleeps `backoff * 2**attempt` between attempts [payments:payments/retry.py#L6-L12]."),
    )

    answer, error = client.tool("ask", {"question": "How does retry back off?", "repo": "payments"})

    link = f"https://github.com/acme/payments/blob/{served.sha}/payments/retry.py#L6-L12"
    assert not error and f"[payments:payments/retry.py#L6-L12]({link})" in answer
    assert "**Sources**" in answer and "unverified" not in answer
    assert served.model.requests[0]["messages"][-1]["content"] == "How does retry back off?"


def test_ask_over_mcp_names_the_commit_it_read_and_how_old_it_is(served: Served, client: Client) -> None:
    served.model.enqueue(
        tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py", "start_line": 6})),
        text("It doubles the wait [payments:payments/retry.py#L6-L12]."),
    )

    answer, error = client.tool("ask", {"question": "How does retry back off?", "repo": "payments"})

    last = answer.splitlines()[-1]
    assert not error and last.startswith(f"_Read `payments` at `{served.sha[:7]}` (committed ")
    assert last.endswith(" ago)._")


def test_ask_over_mcp_never_returns_prose_that_read_no_code_as_an_answer(
    served: Served, client: Client
) -> None:
    served.model.enqueue(text("Retries usually back off exponentially."), text("Still a guess."))

    reply, error = client.tool("ask", {"question": "How does retry back off?", "repo": "payments"})

    assert error and "No code was read" in reply
    assert "exponentially" not in reply and "guess" not in reply


def test_ask_about_a_repo_that_is_not_served_names_the_ones_that_are(client: Client) -> None:
    reply, error = client.tool("ask", {"question": "repo:paymnts how does retry work?"})

    assert error and "repo 'paymnts' is not available. Did you mean 'payments'?" in reply


def test_history_tools_answer_over_mcp_without_showing_secret_files(served: Served, client: Client) -> None:
    listed, error = client.tool("log", {"repo": "payments"})
    shown, show_error = client.tool("show", {"repo": "payments", "sha": served.sha[:10]})

    assert not error and f"{served.sha[:10]} " in listed and "codebot tests: fixture" in listed
    assert not show_error and "  A  +13 -0  payments/retry.py" in shown
    assert "1 secret file(s) changed too" in shown and "sk_live" not in shown and ".env" not in shown


def test_ask_links_a_commit_the_agent_read_over_mcp(served: Served, client: Client) -> None:
    served.model.enqueue(
        tool_calls(("log", {"repo": "payments", "path": "payments/retry.py"})),
        text(f"retry.py came in with [payments@{served.sha[:7]}]."),
    )

    answer, error = client.tool("ask", {"question": "Who added retry.py?", "repo": "payments"})

    link = f"https://github.com/acme/payments/commit/{served.sha}"
    assert not error and f"[payments@{served.sha[:7]}]({link})" in answer and "unverified" not in answer


def test_a_log_given_to_ask_as_context_reaches_the_model_redacted_and_its_token_never(
    served: Served, client: Client
) -> None:
    token = "ghp_" + "a1B2" * 9
    log = f"INFO start\nauth with {token}\nERROR PaymentDeclined: card_expired at payments/retry.py:9\n"
    served.model.enqueue(
        tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py", "start_line": 6})),
        text("The last attempt raises [payments:payments/retry.py#L6-L12]."),
    )
    before = len(served.model.requests)
    arguments = {"question": "Why does checkout fail?", "repo": "payments", "context": log}

    answer, error = client.tool("ask", arguments)

    first = str(served.model.requests[before]["messages"][-1]["content"])
    assert not error and "The last attempt raises" in answer
    assert "PaymentDeclined: card_expired" in first and first.endswith("Why does checkout fail?")
    assert all("a1B2a1B2" not in json.dumps(request) for request in served.model.requests[before:])
    (ask,) = [tool for tool in client.call(client.session.list_tools).tools if tool.name == "ask"]
    assert "redacted" in ask.input_schema["properties"]["context"]["description"]
