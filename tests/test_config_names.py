"""Configuration checked whole at start: a misspelt name is warned about with a guess, a malformed
URL or admin entry is refused in one line naming the variable, and the command line tells the truth
(`--version`, every tool in `codebot tool --help`)."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import run_codebot
from worker.tools import TOOL_FUNCTIONS


def test_a_misspelt_setting_gets_one_warning_line_with_a_did_you_mean(tmp_path: Path) -> None:
    result = run_codebot(
        "repos", "list", env={"CODEBOT_MODLE": "qwen", "SLACK_TOKEN": "xoxb-1"}, cwd=tmp_path
    )
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert (
        "CODEBOT_MODLE (in the environment) is not a codebot setting and is ignored; did you mean CODEBOT_MODEL?"
        in warnings[0]
    )
    assert any("SLACK_TOKEN" in line and "did you mean SLACK_" in line for line in warnings)
    assert len(warnings) == 2 and "xoxb-1" not in result.stderr  # a value is never echoed


def test_a_misspelt_name_in_dotenv_is_warned_about_with_the_file_named(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("# comment\nexport CODEBOT_QUESTION_DEADLINE_SECOND=600\n")
    result = run_codebot("repos", "list", cwd=tmp_path)
    assert "CODEBOT_QUESTION_DEADLINE_SECOND (in .env)" in result.stderr
    assert "did you mean CODEBOT_QUESTION_DEADLINE_SECONDS?" in result.stderr


def test_names_the_code_and_its_libraries_read_are_not_warned_about(tmp_path: Path) -> None:
    env = {
        "SLACK_API_URL": "http://127.0.0.1:9/api/",
        "DISCORD_API_URL": "http://127.0.0.1:9/api",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_ORG_ID": "org-1",
        "CODEBOT_LLAMA_PYTHON": "/nowhere/python",
        "CODEBOT_MODEL": "qwen",
    }
    result = run_codebot("repos", "list", env=env, cwd=tmp_path)
    assert "warning" not in result.stderr, result.stderr


def test_a_base_url_without_a_scheme_is_refused_in_one_line_naming_the_variable(tmp_path: Path) -> None:
    result = run_codebot("repos", "list", env={"OPENAI_BASE_URL": "localhost:8000"}, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().startswith("codebot: OPENAI_BASE_URL: must be an http:// or https:// URL")
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_an_admin_entry_that_is_not_platform_colon_id_is_refused(tmp_path: Path) -> None:
    result = run_codebot("repos", "list", env={"CODEBOT_ADMINS": "slack:U1,bogus"}, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().startswith("codebot: CODEBOT_ADMINS: 'bogus' is not platform:id")
    assert (
        run_codebot("repos", "list", env={"CODEBOT_ADMINS": "slack:U1, discord:42"}, cwd=tmp_path).returncode
        == 0
    )


def test_version_is_printed() -> None:
    result = run_codebot("--version")
    assert result.returncode == 0 and result.stdout.startswith("codebot 0.")


def test_every_tool_of_the_registry_is_listed_in_tool_help() -> None:
    result = run_codebot("tool", "--help", env={"COLUMNS": "400"})
    listed = " ".join(result.stdout.split()).split("one of: ", 1)[1]
    names = {name.strip(" ,.") for name in listed.split()}
    assert len(TOOL_FUNCTIONS) >= 11
    assert {function.__name__ for function in TOOL_FUNCTIONS} <= names


def test_no_setting_of_ours_is_ever_warned_about() -> None:
    from config.env_check import check_names, known_names
    from config.settings import Settings

    every = {name: "x" for name in known_names(Settings)}
    assert "CODEBOT_MODEL_MAX_TOKENS" in every and "REDIS_URL" in every and "SLACK_BOT_TOKEN" in every
    assert check_names(Settings, environ=every) == []
    assert len(check_names(Settings, environ={**every, "DISCORD_TOKEN": "x", "PATH": "/bin"})) == 1
