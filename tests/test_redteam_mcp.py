"""Red team over MCP: a real `codebot mcp` subprocess answers from the same verdicts as every
other route (a renamed secret file stays withheld, a log query is no oracle, no control byte, a
symlink twin of a secret file is withheld, a glob cannot probe a token in a file name)."""

from __future__ import annotations

from pathlib import Path

from tests.support.fixture_repos import make_repo
from tests.support.mcp_rig import served_repo, stdio_client_for


def test_a_renamed_env_file_is_withheld_over_mcp_too(tmp_path: Path) -> None:
    marker = "envmarker" + "Hb6" * 6
    source = tmp_path / "payments-src"
    make_repo(source, {".env": f"FAVORITE={marker}\n", "README.md": "# payments\n"})
    (source / ".env").unlink()  # the next commit renames it: same content, an innocent name
    files = {"config.defaults": f"FAVORITE={marker}\n", "notes\x1b[31m.txt": "red \x1b]8;;x\x07\n"}
    with served_repo(tmp_path, files) as served, stdio_client_for(served) as client:
        read, read_error = client.tool("read_file", {"repo": "payments", "path": "config.defaults"})
        found, _ = client.tool("search", {"repo": "payments", "pattern": "FAVORITE|red"})
        right, _ = client.tool("log", {"repo": "payments", "query": marker[:12], "match": "diff"})
        wrong, _ = client.tool("log", {"repo": "payments", "query": marker[:11] + "x", "match": "diff"})

    assert not read_error and "withheld: a secret file (by its name) in another commit" in read
    assert marker not in read + found + right + wrong
    assert right.replace(marker[:12], "Q") == wrong.replace(marker[:11] + "x", "Q")
    assert "\x1b" not in found and "\x07" not in found and "red ]8;;x" in found


def test_a_symlink_twin_and_a_token_file_name_give_nothing_away_over_mcp(tmp_path: Path) -> None:
    relay = "RELAY=relaymarker" + "Hb6" * 6
    token = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    make_repo(tmp_path / "payments-src", {".env": relay}, links={"relay-link": relay})  # one blob, two names
    files = {f"docs/{token}.md": "hello\n", "README.md": "# payments\n"}
    with served_repo(tmp_path, files) as served, stdio_client_for(served) as client:
        listed, _ = client.tool("list_files", {"repo": "payments"})
        read, _ = client.tool("read_file", {"repo": "payments", "path": "relay-link"})
        shown, _ = client.tool("show", {"repo": "payments", "sha": "HEAD~1"})
        probes = [
            client.tool(tool, {"repo": "payments", **extra, "glob": f"docs/{guess}*"})[0].replace(guess, "Q")
            for tool, extra in (("list_files", {}), ("search", {"pattern": "hello"}))
            for guess in (token[:10], token[:9] + "x")
        ]

    assert relay not in listed + read + shown and "relay-link  (35 B, withheld: never shown)" in listed
    assert "withheld: a secret file (by its name) in another commit" in read
    assert probes[0] == probes[1] and probes[2] == probes[3]  # a right and a wrong guess, alike
