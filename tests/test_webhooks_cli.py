"""`codebot webhooks` as an operator runs it: on 127.0.0.1 unless told, refusing to start without a
secret, and taking a signed push from its first line on."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from codebot.cli_parser import build_parser as _parser
from config.errors import ConfigError
from config.settings import Settings
from tests.support.cli import run_codebot
from tests.support.forge_payloads import post
from tests.support.git_remote import write_whitelist
from tests.support.webhooks_rig import HooksRig, build_hooks_rig, push_from
from tests.support.worker_procs import PROJECT_ROOT, settings_env


@pytest.fixture
def hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HooksRig]:
    yield from build_hooks_rig(tmp_path, monkeypatch)


def start(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "codebot.cli", "webhooks", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=PROJECT_ROOT,
    )


def test_the_receiver_listens_on_localhost_unless_told_and_refuses_to_start_without_a_secret(
    hooks: HooksRig,
) -> None:
    args = _parser().parse_args(["webhooks"])
    assert (args.host, args.port) == (None, None)  # the settings' defaults apply
    assert Settings.model_fields["webhooks_host"].default == "127.0.0.1"
    unset = refused_start(settings_env(hooks.settings, VAULT_HOOK_SECRET=""))
    assert unset.endswith(
        "webhook_secret of repo 'vault' names ${VAULT_HOOK_SECRET}, which is not set — export it"
    )
    assert unset.startswith(f"codebot: {hooks.settings.repos_file}:")  # the file and line at fault
    no_vault = hooks.settings.repos_file.with_name("no-vault.toml")
    no_vault.write_text(re.sub(r"webhook_secret = .*\n", "", hooks.settings.repos_file.read_text()))
    no_secrets = {
        key: None for key in Settings.model_fields if key.startswith("webhooks_") and "secret" in key
    }
    line = refused_start(
        settings_env(hooks.settings.model_copy(update={**no_secrets, "repos_file": no_vault}))
    )
    assert line.startswith(
        "codebot: CODEBOT_WEBHOOKS_GITHUB_SECRET (or _GITLAB_, _GITEA_, _BITBUCKET_): none set"
    )


def refused_start(env: dict[str, str]) -> str:
    """`codebot webhooks` that must refuse to start: its one line on stderr."""
    process = start(env)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 2 and "Traceback" not in stderr, stderr
    return stderr.strip()


def test_an_operator_starts_codebot_webhooks_and_a_signed_push_queues_its_refresh(hooks: HooksRig) -> None:
    process = start(settings_env(hooks.settings, VAULT_HOOK_SECRET="vault-own-secret-2f6d83"))
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        where = re.search(r"http://127\.0\.0\.1:(\d+)/webhooks", line)
        assert where, line + (process.stderr.read() if process.poll() is not None and process.stderr else "")
        sha = hooks.remote.commit({"a.txt": "1\n"})
        assert post(int(where[1]), push_from("github", sha))[0] == 202
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    assert hooks.queued() == 1
    hooks.work()
    assert hooks.served("payments") == sha


def test_codebot_status_shows_each_forges_last_delivery_and_its_verdict(hooks: HooksRig) -> None:
    sha = hooks.remote.commit({"a.txt": "1\n"})
    assert hooks.post(push_from("github", sha))[0] == 202
    assert hooks.post(push_from("gitlab", sha, secret="a-guess"))[0] == 401
    env = settings_env(hooks.settings, COLUMNS="200", VAULT_HOOK_SECRET="x")
    terminal = run_codebot("status", env=env, inherit_environment=False)
    as_json = run_codebot("status", "--json", env=env, inherit_environment=False)
    assert terminal.returncode == 0, terminal.stderr
    assert "github: " in terminal.stdout and "202 refresh queued (payments)" in terminal.stdout
    assert "401 refused: bad or missing signature" in terminal.stdout
    shown = {
        hook["forge"]: (hook["status"], hook["verdict"]) for hook in json.loads(as_json.stdout)["webhooks"]
    }
    assert shown == {"github": (202, "refresh queued"), "gitlab": (401, "refused: bad or missing signature")}


def test_a_webhook_secret_written_into_the_repos_file_is_refused_naming_its_line(tmp_path: Path) -> None:
    entry = {"name": "app", "url": "https://github.com/acme/app.git", "webhook_secret": "hunter2-in-the-file"}
    with pytest.raises(ConfigError) as refused:
        write_whitelist(tmp_path, [entry])
    assert str(refused.value).startswith(
        f"{tmp_path / 'repos.toml'}:1: webhook_secret of repo 'app' must name"
    )
    assert "hunter2" not in str(refused.value)
