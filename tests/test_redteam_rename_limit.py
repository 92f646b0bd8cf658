"""Red team, rename pairing at scale: a `.env` renamed with a one-line edit in the same commit as a
1,001-file vendor upgrade (tests/support/vendor_upgrade_repo.py) is past git's default rename
limit, where git pairs no edited rename. Its values stay withheld by every route: git pairs it
within `lineage_rename_limit`, and past that limit lineage pairs the secret file by content itself.

The repo is synced by the real Mirrors and read by the real tools through the registry, and by a
real `codebot mcp` subprocess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.fixture_repos import make_repo
from tests.support.git_remote import make_mirrors
from tests.support.history_repo import HistoryRepo, Mirrored, mirrored
from tests.support.mcp_rig import served_repo, stdio_client_for
from tests.support.vendor_upgrade_repo import RENAMED, VendorUpgrade, build_vendor_upgrade_repo
from tests.test_redteam_history import answers
from worker.tools import build_registry

REGISTRY = build_registry()


def call(app: Mirrored, name: str, **arguments: object) -> tuple[bool, str]:
    outcome = REGISTRY.call(app.context(), name, {"repo": "app", **arguments})
    return outcome.ok, outcome.text + "\n" + json.dumps(outcome.data)


def every_route(app: Mirrored, built: VendorUpgrade) -> dict[str, tuple[bool, str]]:
    shas, value = built.shas, built.values[0]
    return {
        "read_file": call(app, "read_file", path=RENAMED),
        "search": call(app, "search", pattern="FAVORITE|SHARED_NAME"),
        "blame": call(app, "blame", path=RENAMED),
        "show": call(app, "show", sha=shas["upgrade"]),
        "show path": call(app, "show", sha=shas["upgrade"], path=RENAMED),
        "diff": call(app, "diff", **{"from": shas["start"], "to": shas["later"]}),
        "diff path": call(app, "diff", **{"from": shas["start"], "path": RENAMED}),
        "log -p right": call(app, "log", query=value[:12], match="diff"),
        "log -p wrong": call(app, "log", query=value[:11] + "#", match="diff"),
    }


@pytest.mark.parametrize(
    "settings",
    [{}, {"lineage_rename_limit": 1000}, {"lineage_rename_limit": 1000, "history_depth": 3}],
    ids=["within-the-limit", "past-the-limit", "past-the-limit-in-a-window"],
)
def test_a_secret_file_renamed_with_an_edit_beside_a_1001_file_vendor_upgrade_shows_none_of_its_values(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    built = build_vendor_upgrade_repo(tmp_path / "src")
    with mirrored(HistoryRepo(built.path, built.path, built.shas), tmp_path / "mirror", **settings) as app:
        shown = every_route(app, built)

    text = "".join(text for _, text in shown.values())
    assert not any(value in text for value in built.values)
    assert "withheld" in shown["read_file"][1] and "withheld" in shown["show path"][1]
    assert shown["search"][1].startswith("No matches")
    assert not shown["blame"][0] and "no lines to blame" in shown["blame"][1]
    right, wrong = (shown[f"log -p {guess}"][1] for guess in ("right", "wrong"))
    assert right.replace(built.values[0][:12], "Q") == wrong.replace(built.values[0][:11] + "#", "Q")
    assert shown["show"][0] and shown["diff"][0]  # the upgrade itself is shown


def test_a_mirror_synced_before_a_file_renamed_past_the_limit_was_named_secret_knows_what_a_fresh_one_knows(
    tmp_path: Path,
) -> None:
    built = build_vendor_upgrade_repo(tmp_path / "src", first_name="settings.txt")  # innocent, at first
    entry = [{"name": "app", "url": str(built.path), "branch": "main", "history_depth": "all"}]
    stepwise = make_mirrors(tmp_path / "stepwise", entry, lineage_rename_limit=1000)
    assert stepwise.sync("app").ok  # keeps the upgrade's diff: its renames were past the limit
    make_repo(built.path, {".env": built.first})  # names the first settings secret, two commits later
    fresh = make_mirrors(tmp_path / "fresh", entry, lineage_rename_limit=1000)
    calls: list[tuple[str, dict[str, Any]]] = [("read_file", {"path": RENAMED}), ("show", {"sha": "HEAD~2"})]

    assert stepwise.sync("app").ok and fresh.sync("app").ok
    seen = answers(stepwise, calls)
    assert seen == answers(fresh, calls)
    assert "withheld: it descends from a secret file" in seen[0]
    assert not any(value in text for value in built.values for text in seen)


def test_a_secret_file_renamed_past_the_rename_limit_is_withheld_over_mcp_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = build_vendor_upgrade_repo(tmp_path / "payments-src")
    monkeypatch.setenv("CODEBOT_LINEAGE_RENAME_LIMIT", "1000")  # the sync's: lineage pairs it itself
    with served_repo(tmp_path, {"NOTES.md": "lib 2.0\n"}) as served, stdio_client_for(served) as client:
        repo = {"repo": "payments"}
        shown = [
            client.tool("read_file", {**repo, "path": RENAMED}),
            client.tool("search", {**repo, "pattern": "FAVORITE|SHARED_NAME"}),
            client.tool("blame", {**repo, "path": RENAMED}),
            client.tool("show", {**repo, "sha": built.shas["upgrade"]}),
            client.tool("diff", {**repo, "from": built.shas["start"], "path": RENAMED}),
            client.tool("log", {**repo, "query": built.values[1][:12], "match": "diff"}),
        ]

    text = "".join(text for text, _ in shown)
    assert not any(value in text for value in built.values)
    assert "withheld" in shown[0][0] and not shown[0][1]
