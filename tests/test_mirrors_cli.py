"""`codebot repos sync|list` as a user sees them, and credentials never shown anywhere."""

from __future__ import annotations

import shutil
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from tests.support.git_remote import GitRemote, make_mirrors, mirrors_for, mirrors_of, serve_git_http
from worker.repos.mirrors import Mirrors
from worker.repos.sync_cli import human_size, run_list, run_sync, time_ago


def _console() -> tuple[Console, StringIO]:
    out = StringIO()
    return Console(file=out, width=200, color_system=None), out


def test_repos_sync_prints_one_summary_line_per_repo_and_exits_0(tmp_path: Path) -> None:
    one, two = GitRemote.create(tmp_path / "one"), GitRemote.create(tmp_path / "two")
    mirrors = mirrors_of(tmp_path, {"one": one, "rq": two})
    console, out = _console()

    assert run_sync(mirrors.settings, mirrors.whitelist, [], console) == 0
    assert f"one  ✓ {one.sha()[:7]} (new)" in out.getvalue()
    assert f"rq   ✓ {two.sha()[:7]} (new)" in out.getvalue()

    console, out = _console()
    assert run_sync(mirrors.settings, mirrors.whitelist, ["rq"], console) == 0
    assert out.getvalue().strip().splitlines()[-1] == f"rq  ✓ {two.sha()[:7]} (unchanged)"


def test_repos_sync_failure_says_why_and_what_is_still_served_and_exits_1(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    mirrors = mirrors_for(tmp_path, remote)
    served = remote.sha()
    mirrors.sync("app")
    remote.delete_branch("main")
    console, out = _console()

    assert run_sync(mirrors.settings, mirrors.whitelist, ["app"], console) == 1
    line = out.getvalue().strip().splitlines()[-1]
    assert line.startswith("app  ✗ fetch failed: branch 'main' not found on ")
    assert line.endswith(f"(still serving {served[:7]})")


def test_repos_sync_of_an_unknown_name_lists_the_known_names_and_exits_2(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    mirrors = mirrors_for(tmp_path, remote)
    console, out = _console()

    assert run_sync(mirrors.settings, mirrors.whitelist, ["app", "nope"], console) == 2
    assert out.getvalue() == "unknown repo 'nope' — known repos: app\n"
    assert not (tmp_path / "data" / "repos" / "app").exists()  # nothing was synced


def test_repos_list_shows_name_branch_commit_age_size_and_status(tmp_path: Path) -> None:
    one, two = GitRemote.create(tmp_path / "one"), GitRemote.create(tmp_path / "two")
    mirrors = mirrors_of(tmp_path, {"one": one, "two": two})
    mirrors.sync("one")
    console, out = _console()

    assert run_list(mirrors.settings, mirrors.whitelist, console) == 0
    lines = {line.split()[0]: line.strip() for line in out.getvalue().splitlines() if line.strip()}
    assert lines["repo"].split() == ["repo", "branch", "commit", "age", "size", "status"]
    assert lines["one"].split()[:5] == ["one", "main", one.sha()[:7], "just", "now"]
    assert "B" in lines["one"] and lines["one"].endswith("✓ ok")
    assert "not synced — run codebot repos sync" in lines["two"]


def test_repos_list_shows_the_last_error_beside_the_snapshot_still_served(tmp_path: Path) -> None:
    remote = GitRemote.create(tmp_path / "origin")
    mirrors = mirrors_for(tmp_path, remote)
    served = remote.sha()
    mirrors.sync("app")
    shutil.move(remote.bare, tmp_path / "gone.git")
    mirrors.sync("app")
    console, out = _console()

    run_list(mirrors.settings, mirrors.whitelist, console)

    shown = " ".join(out.getvalue().split())  # long errors wrap inside their column
    assert f"app main {served[:7]} just now" in shown
    assert "✗ fetch failed:" in shown
    assert "does not appear to be a git repository (serving this snapshot)" in shown


def test_ages_and_sizes_read_like_a_person_would_say_them() -> None:
    assert [time_ago(5), time_ago(185), time_ago(3 * 3600 + 5), time_ago(86400), time_ago(5 * 86400)] == [
        "just now",
        "3 min ago",
        "3 h ago",
        "1 day ago",
        "5 days ago",
    ]
    assert [human_size(512), human_size(2048), human_size(5 * 1024**2 + 1), human_size(3 * 1024**3)] == [
        "512 B",
        "2.0 KB",
        "5.0 MB",
        "3.0 GB",
    ]


def _all_output(mirrors: Mirrors) -> str:
    """Everything a user or a log could see after a sync attempt: result, status, list, sync."""
    result = mirrors.sync("private")
    console, out = _console()
    run_list(mirrors.settings, mirrors.whitelist, console)
    run_sync(mirrors.settings, mirrors.whitelist, ["private"], console)
    state = (mirrors.root / "private" / "state.json").read_text()
    config = (mirrors.root / "private" / "mirror.git" / "config").read_text()
    return "\n".join([repr(result), repr(mirrors.status()), out.getvalue(), state, config])


@pytest.mark.parametrize("branch", [None, "main"])
def test_a_credential_in_the_url_never_shows_in_errors_status_output_or_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, branch: str | None
) -> None:
    monkeypatch.setenv("REPO_TOKEN", "s3cr3t-t0ken-value")
    entry = {"name": "private", "url": "https://deploy:${REPO_TOKEN}@127.0.0.1:9/team/private.git"}
    mirrors = make_mirrors(tmp_path, [{**entry, **({"branch": branch} if branch else {})}])

    shown = _all_output(mirrors)

    assert "s3cr3t" not in shown + caplog.text and "deploy:" not in shown + caplog.text
    assert "fetch failed:" in shown and "https://127.0.0.1:9/team/private.git" in shown


def test_a_private_repo_over_http_syncs_with_a_token_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    (home / ".gitconfig").write_text("[credential]\n\thelper = store\n")  # a common setup
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    remote = GitRemote.create(tmp_path / "served" / "x")
    pushed = remote.sha()
    shutil.move(remote.bare, tmp_path / "served" / "private.git")
    with serve_git_http(tmp_path / "served", "deploy", "right-t0ken-value") as base:
        entry = {"name": "private", "url": base.replace("//", "//deploy:${REPO_TOKEN}@") + "/private.git"}
        monkeypatch.setenv("REPO_TOKEN", "right-t0ken-value")
        good = make_mirrors(tmp_path / "good", [entry])
        assert good.sync("private").sha == pushed
        assert "right-t0ken" not in (good.root / "private/mirror.git/config").read_text()

        monkeypatch.setenv("REPO_TOKEN", "wrong-t0ken-value")
        bad = make_mirrors(tmp_path / "bad", [entry])
        shown = _all_output(bad)  # a password prompt would hang here, until the test's timeout

    assert not (home / ".git-credentials").exists()  # the token was not stored anywhere
    assert "Authentication failed" in shown and "wrong-t0ken" not in shown
