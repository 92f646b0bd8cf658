"""search's own exclusions: `.git` and secret file names are never searched, whichever way the
globs reach ripgrep (the file-name ones grouped in one alternation, the others one by one).

Snapshots never hold such files (the mirrors leave them out); these tests put them in a plain
folder to prove the tool's second line of defence on its own.
"""

from __future__ import annotations

from pathlib import Path

from config.repos import RepoSpec
from config.settings import load_settings
from worker.repos.snapshot import Snapshot
from worker.tools import build_registry, make_context
from worker.tools.search_command import exclusion_globs

FILES = [
    "app.py",
    "sub/deep/code.py",
    ".env",
    "sub/.ENV",
    "sub/deep/prod.env",
    "keys/server.PEM",
    "id_rsa_old",
    "sub/credentials.json",
    ".aws/credentials",
    ".git/config",
    "sub/.git/HEAD",
    "conf/a,b.cfg",
    "conf/{x}.cfg",
]


def searched_files(tmp_path: Path, **overrides: object) -> list[str]:
    for name in FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("needle\n")
    settings = load_settings(env_file=None, data_dir=tmp_path.parent / "data", **overrides)
    spec = RepoSpec(name="plain", url=str(tmp_path), display_url=str(tmp_path))
    ctx = make_context(settings, {"plain": Snapshot(spec, "0" * 40, "main", tmp_path, 0.0, 0.0)})
    outcome = build_registry().call(ctx, "search", {"pattern": "needle"})
    assert outcome.ok, outcome.text
    return sorted({m["path"] for m in outcome.data["matches"]})


def test_secret_file_names_and_git_folders_are_never_searched_at_any_depth(tmp_path: Path) -> None:
    found = searched_files(tmp_path)
    assert found == ["app.py", "conf/a,b.cfg", "conf/{x}.cfg", "sub/deep/code.py"]


def test_a_secret_glob_with_alternation_characters_or_a_slash_keeps_its_own_meaning(tmp_path: Path) -> None:
    globs = (".env", "*.pem", "a,b.cfg", ".aws/credentials")
    arguments = exclusion_globs(globs)
    assert arguments[0] == "--iglob=!{.git,.env,*.pem}"  # the file names, in one alternation
    assert arguments[1:] == ["--iglob=!a,b.cfg", "--iglob=!.aws/credentials"]
    found = searched_files(tmp_path, secret_file_globs=globs)
    expected = ["app.py", "conf/{x}.cfg", "id_rsa_old", "sub/credentials.json", "sub/deep/code.py"]
    assert found == [*expected, "sub/deep/prod.env"]
