"""Red team, secret files by lineage: a secret file renamed (with or without an edit) stays
withheld by every route, in every revision; a log query is no oracle; a UTF-16 message is read.

The hostile history is tests/support/redteam_repo.py, synced by the real Mirrors and read by the
real tools through the registry, as the model calls them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.git_remote import GitRemote, make_mirrors
from tests.support.history_repo import Mirrored, mirrored
from tests.support.redteam_repo import RedTeam, build_redteam_repo
from tests.test_redteam_history import answers
from worker.tools import build_registry

REGISTRY = build_registry()


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RedTeam, Mirrored]]:
    built = build_redteam_repo(tmp_path_factory.mktemp("redteam"))
    with mirrored(built.repo, tmp_path_factory.mktemp("mirror")) as served:
        yield built, served


def call(app: Mirrored, name: str, **arguments: object) -> tuple[bool, str]:
    outcome = REGISTRY.call(app.context(), name, {"repo": "app", **arguments})
    return outcome.ok, outcome.text + "\n" + json.dumps(outcome.data)


def test_a_renamed_env_file_is_never_readable_by_read_file_search_blame_or_a_symlink(
    team: tuple[RedTeam, Mirrored],
) -> None:
    red, app = team
    shown = {
        "read_file": call(app, "read_file", path="config.defaults"),
        "symlink": call(app, "read_file", path="defaults.link"),
        "search": call(app, "search", pattern="FAVORITE|envmarker"),
        "blame": call(app, "blame", path="config.defaults"),
    }

    assert red.env_marker not in "".join(text for _, text in shown.values())
    assert "withheld: a secret file (by its name) in another commit" in shown["read_file"][1]
    assert "withheld" in shown["symlink"][1]
    assert shown["search"][1].startswith("No matches")
    assert not shown["blame"][0] and "no lines to blame" in shown["blame"][1]


def test_a_renamed_secret_file_defines_nothing_in_the_symbol_index(team: tuple[RedTeam, Mirrored]) -> None:
    red, app = team
    ok, found = call(app, "find_definition", symbol=red.function)
    listed = call(app, "list_files", path="")[1]

    assert not ok and "no definition" in found
    assert "settings_loader.py" in listed  # named, as withheld: its content is what is secret


def test_a_secret_file_renamed_and_edited_shows_none_of_its_lines_anywhere(
    team: tuple[RedTeam, Mirrored],
) -> None:
    red, app = team
    shas = red.repo.shas
    shown = [
        call(app, "show", sha=shas["reword"], path="config/service.txt"),  # the pathspec hides the rename
        call(app, "show", sha=shas["next"]),  # its old lines are the next commit's context
        call(app, "diff", **{"from": shas["settings"], "path": "config/service.txt"}),
        call(app, "diff", **{"from": shas["start"], "to": shas["next"]}),
        call(app, "read_file", path="config/service.txt"),
    ]

    text = "".join(text for _, text in shown)
    assert all(ok for ok, _ in shown)
    assert red.pem_marker not in text and "line two" not in text
    assert text.count("withheld: it descends from a secret file") >= 2


def _answer(app: Mirrored, query: str, regex: bool, match: str) -> str:
    """A log answer with the query's own echo taken out (it is the only thing allowed to differ)."""
    text = call(app, "log", query=query, regex=regex, match=match)[1]
    return text.replace(json.dumps(query), "Q").replace(repr(query), "Q").replace(query, "Q")


def test_a_log_query_answers_a_right_and_a_wrong_next_character_identically(
    team: tuple[RedTeam, Mirrored],
) -> None:
    red, app = team
    for secret, match in ((red.password, "diff"), (red.token, "message"), (red.env_marker, "both")):
        prefix, right = secret[:10], secret[10]
        wrong = next(c for c in "xyzXYZ23" if c != right)
        for template, regex in (("{}", False), (re.escape("{}") + "|REDACTED", True), ("{}.*", True)):
            answers = [
                _answer(app, template.replace(re.escape("{}"), "{}").format(prefix + guess), regex, match)
                for guess in (right, wrong)
            ]
            assert answers[0] == answers[1], (secret[:4], template)
    control = _answer(app, "REDACTED", True, "diff")  # redacted text matches for right and wrong alike
    assert control.startswith("1 commit(s)") and red.repo.shas["start"][:10] in control


def test_a_utf16_commit_message_is_decoded_and_its_token_redacted(team: tuple[RedTeam, Mirrored]) -> None:
    red, app = team
    shown = call(app, "show", sha=red.repo.shas["utf16"])[1]
    listed = call(app, "log", limit=1)[1]

    assert "Use the backup token [REDACTED:github-token]" in shown
    assert "Use the backup token [REDACTED:github-token]" in listed
    assert red.utf16_token not in shown + listed and "\x00" not in shown + listed


def test_a_credentials_file_renamed_and_cut_out_of_its_shape_stays_withheld(
    team: tuple[RedTeam, Mirrored],
) -> None:
    red, app = team
    shown = [
        call(app, "read_file", path="keys/deploy-notes.md"),
        call(app, "search", pattern="[A-Za-z0-9+/]{40,}"),
        call(app, "show", sha=red.repo.shas["trim"]),
        call(app, "show", sha=red.repo.shas["trim"], path="keys/deploy-notes.md"),
    ]

    text = "".join(text for _, text in shown)
    assert not any(line in text for line in red.key_lines)
    assert "withheld: it descends from a secret file" in shown[0][1]
    assert "withheld: it is, or was edited from, a credentials file" in shown[2][1]


def test_a_path_holding_the_record_separator_hides_no_rename_in_a_window(tmp_path: Path) -> None:
    marker = "sepmarker" + "Hb7" * 6
    remote = GitRemote.create(tmp_path / "remote")
    remote.commit({".env": f"FAVORITE={marker}\n"}, "Add settings")
    # "\x1e" sorts before every other path: git lists it first among the commit's changes
    remote.commit(
        {".env": None, "notes/zz.txt": f"FAVORITE={marker}\nMORE=1\n", "\x1enotes.txt": "x\n"}, "Move"
    )
    remote.commit({"README.md": "# demo, moved\n"}, "Tidy")
    host = make_mirrors(tmp_path / "host", [{"name": "app", "url": str(remote.bare), "history_depth": 3}])
    assert host.sync("app").ok

    seen = answers(host, [("read_file", {"path": "notes/zz.txt"})])

    assert marker not in seen[0] and "withheld" in seen[0]
