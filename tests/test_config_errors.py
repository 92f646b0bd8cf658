"""Bad configuration stops a process with one line naming the variable or file:line — never a traceback."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from config.errors import ConfigError
from config.repos import infer_web_url, load_whitelist
from config.settings import load_settings
from tests.support.cli import run_codebot


def test_a_non_numeric_limit_is_named_with_its_variable_in_one_line() -> None:
    result = run_codebot("repos", "list", env={"CODEBOT_SEARCH_MAX_RESULTS": "lots"})
    assert result.returncode == 2
    assert result.stderr.strip().startswith("codebot: CODEBOT_SEARCH_MAX_RESULTS: ")
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_bad_repos_file_entry_is_reported_with_its_file_and_line(tmp_path: Path) -> None:
    repos = tmp_path / "repos.toml"
    repos.write_text('[[repo]]\nname = "ok"\nurl = "."\n\n[[repo]]\nname = "Bad Name"\nurl = "."\n')
    result = run_codebot("repos", "list", env={"CODEBOT_REPOS_FILE": str(repos)})
    assert result.returncode == 2
    assert f"{repos}:5: name 'Bad Name' must be" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_repos_file_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"copy config/repos\.example\.toml"):
        load_whitelist(tmp_path / "nope.toml")


def test_invalid_toml_and_duplicate_names_and_unknown_keys_are_refused(tmp_path: Path) -> None:
    cases = {
        'name = "x"\n[[repo]\n': "invalid TOML",
        '[[repo]]\nname = "a"\nurl = "."\n[[repo]]\nname = "a"\nurl = "."\n': "already used at line 1",
        '[[repo]]\nname = "a"\nurl = "."\ncolour = "red"\n': "unknown key 'colour'",
        '[[repo]]\nname = "a"\nurl = "."\nchannels = ["C0123"]\n': "must look like 'slack:C0123'",
        '[[repo]]\nname = "a"\n': "needs a url",
    }
    for number, (text, message) in enumerate(cases.items()):
        path = tmp_path / f"r{number}.toml"
        path.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_whitelist(path)


def test_a_credential_in_a_repo_url_comes_from_the_environment_and_is_never_displayed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "repos.toml"
    path.write_text(
        '[[repo]]\nname = "p"\nurl = "https://x-access-token:${GH_TOKEN}@github.com/acme/p.git"\n'
    )
    monkeypatch.setenv("GH_TOKEN", "ghp_secretvalue")
    repo = load_whitelist(path).repos[0]
    assert "ghp_secretvalue" in repo.url
    assert repo.display_url == "https://github.com/acme/p.git"
    assert repo.web_url == "https://github.com/acme/p"
    monkeypatch.delenv("GH_TOKEN")
    with pytest.raises(ConfigError, match="GH_TOKEN is not set"):
        load_whitelist(path)


def test_web_urls_are_inferred_for_github_gitlab_and_bitbucket_remotes() -> None:
    assert infer_web_url("git@github.com:rq/rq.git") == "https://github.com/rq/rq"
    assert infer_web_url("https://gitlab.com/group/sub/proj.git") == "https://gitlab.com/group/sub/proj"
    assert infer_web_url("ssh://git@bitbucket.org/team/repo") == "https://bitbucket.org/team/repo"
    assert infer_web_url("https://git.internal.example/x.git") is None


def test_settings_read_the_contract_variable_names() -> None:
    settings = load_settings(env_file=None)
    assert settings.redis_url is None and settings.data_dir == Path("data")
    os.environ["REDIS_URL"] = "redis://example:6380/1"
    os.environ["CODEBOT_MODEL"] = "local-model"
    try:
        settings = load_settings(env_file=None)
    finally:
        del os.environ["REDIS_URL"], os.environ["CODEBOT_MODEL"]
    assert settings.redis_url == "redis://example:6380/1" and settings.model == "local-model"


def test_tokens_and_keys_never_show_in_the_settings_printed_or_logged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = {
        "SLACK_BOT_TOKEN": "xoxb-1-sekret",
        "SLACK_APP_TOKEN": "xapp-1-sekret",
        "SLACK_SIGNING_SECRET": "sign-sekret",
        "DISCORD_BOT_TOKEN": "discord-sekret",
        "OPENAI_API_KEY": "sk-sekret",
        "CODEBOT_MCP_TOKEN": "mcp-sekret-0123456789abcdef",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    settings = load_settings(env_file=None)
    shown = f"{settings!r} {settings} {settings.model_dump()} {settings.model_dump_json()}"
    assert "sekret" not in shown
    assert (
        settings.slack_bot_token is not None
        and settings.slack_bot_token.get_secret_value() == "xoxb-1-sekret"
    )
    monkeypatch.setenv("OPENAI_API_KEY", " ")
    assert load_settings(env_file=None).openai_api_key is None  # blank is unset, as before


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr.strip()


def test_a_list_setting_that_is_not_json_is_named_in_one_line() -> None:
    line = one_line(run_codebot("repos", "list", env={"CODEBOT_SECRET_FILE_GLOBS": "*.pem"}))
    assert line.startswith("codebot: CODEBOT_SECRET_FILE_GLOBS: not a JSON list")


def test_a_bad_redis_url_is_named_by_its_contract_name_without_echoing_its_password() -> None:
    line = one_line(run_codebot("status", env={"REDIS_URL": "http://:hunter2@example:6379"}))
    assert line.startswith("codebot: REDIS_URL: must start with redis://") and "hunter2" not in line


def test_a_dot_env_that_is_not_utf8_is_named_in_one_line(tmp_path: Path) -> None:
    (tmp_path / ".env").write_bytes(b"CODEBOT_MODEL=caf\xe9\n")
    line = one_line(run_codebot("repos", "list", cwd=tmp_path))
    assert line == "codebot: .env: not UTF-8 text — save it as UTF-8"


def test_blank_path_settings_mean_their_defaults_not_the_working_directory() -> None:
    settings = load_settings(env_file=None, data_dir="", repos_file=" ")
    assert settings.data_dir == Path("data") and settings.repos_file == Path("config/repos.toml")


def test_a_data_dir_that_cannot_be_made_is_named_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    env = {"CODEBOT_DATA_DIR": str(tmp_path / "a-file" / "data")}
    assert one_line(run_codebot("repos", "sync", env=env)).startswith(
        "codebot: CODEBOT_DATA_DIR: cannot create"
    )
    assert one_line(run_codebot("status", env=env)).startswith("codebot: CODEBOT_DATA_DIR: cannot create")


def test_a_repos_file_that_is_not_utf8_or_uses_inline_entries_is_reported_where_it_fails(
    tmp_path: Path,
) -> None:
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'[[repo]]\nname = "a"\nurl = "."\ndescription = "caf\xe9"\n')
    with pytest.raises(ConfigError, match=r"latin\.toml:4: not UTF-8 text"):
        load_whitelist(latin)
    inline = tmp_path / "inline.toml"
    inline.write_text('repo = [{name = "a", url = "."}, {name = "a", url = "."}]\n')
    with pytest.raises(
        ConfigError, match=r"inline\.toml: repo entry 2: repo name 'a' is already used at entry 1"
    ):
        load_whitelist(inline)
    spaced = tmp_path / "spaced.toml"
    spaced.write_text('[[ repo ]]\nname = "a"\nurl = "."\n\n[[repo]]\nname = "B"\nurl = "."\n')
    with pytest.raises(ConfigError, match=r"spaced\.toml:5: name 'B'"):
        load_whitelist(spaced)


def test_a_port_out_of_range_is_a_usage_error_not_a_traceback() -> None:
    result = run_codebot(
        "mcp", "--http", "--port", "99999", env={"CODEBOT_MCP_TOKEN": "0123456789abcdef0123"}
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "argument --port: '99999' is not a TCP port (0-65535)" in result.stderr


def test_a_worker_without_a_model_endpoint_refuses_to_start_in_one_line(tmp_path: Path) -> None:
    from worker.ops.redis_connection import stop_embedded_server

    env = {"CODEBOT_DATA_DIR": str(tmp_path / "data")}
    try:
        result = run_codebot("worker", "--burst", env=env)
    finally:
        stop_embedded_server(load_settings(env_file=None, data_dir=tmp_path / "data"))
    assert result.returncode == 2
    assert result.stderr.strip().startswith("codebot: OPENAI_API_KEY / OPENAI_BASE_URL: not set")
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_unreachable_discord_api_stops_the_adapter_in_one_line(tmp_path: Path) -> None:
    from worker.ops.redis_connection import stop_embedded_server

    env = {
        "CODEBOT_DATA_DIR": str(tmp_path / "data"),
        "DISCORD_BOT_TOKEN": "token",
        "DISCORD_API_URL": "http://127.0.0.1:1/api/v10",
    }
    try:
        result = run_codebot("discord", env=env)
    finally:
        stop_embedded_server(load_settings(env_file=None, data_dir=tmp_path / "data"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("codebot: DISCORD_API_URL: cannot reach Discord")


def test_a_console_proxy_or_host_that_is_not_an_address_or_a_name_is_named_with_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cases = {
        "CODEBOT_WEB_TRUSTED_PROXIES": (
            '["10.0.0.0/8", "proxy.local"]',
            "'proxy.local' is not an IP address",
        ),
        "CODEBOT_WEB_ALLOWED_HOSTS": ('["console.example.com:443"]', "without a port"),
    }
    for variable, (value, message) in cases.items():
        with monkeypatch.context() as env:
            env.setenv(variable, value)
            with pytest.raises(ConfigError, match=f"^{variable}: .*{message}"):
                load_settings(env_file=None)
    monkeypatch.setenv("CODEBOT_WEB_TRUSTED_PROXIES", '["127.0.0.1", "10.0.0.0/8", "::1"]')
    assert load_settings(env_file=None).web_trusted_proxies == ("127.0.0.1", "10.0.0.0/8", "::1")
