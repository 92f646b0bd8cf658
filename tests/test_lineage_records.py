"""The lineage records a mirror keeps between syncs (descent edges, each window commit's names,
the blobs whose content was judged) are stored gzipped; records written plain by an earlier
version are still read, and a record that is lost or damaged makes the next sync scan the whole
history again instead of deciding without it.

Real git remotes (tests/support/git_remote.py), the real Mirrors, the real tools."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

from tests.support.git_remote import GitRemote, make_mirrors
from tests.test_redteam_history import answers
from worker.repos.mirrors import Mirrors

MARKER = "origmarker" + "Hb2" * 6
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": "notes.txt"}), ("show", {"sha": "HEAD~1"}), ("log", {"query": "more"}),
]  # fmt: skip
RECORDS = ("codebot-lineage-edges", "codebot-lineage-checked")


def edited_notes(root: Path) -> tuple[GitRemote, list[dict[str, Any]]]:
    """notes.txt, then an edit of it: the second version descends from the first."""
    remote = GitRemote.create(root / "remote")
    remote.commit({"notes.txt": f"{MARKER}\n"}, "Add notes")
    remote.commit({"notes.txt": f"{MARKER}\nand more\n"}, "Edit notes")
    return remote, [{"name": "app", "url": str(remote.bare), "branch": "main", "history_depth": "all"}]


def after_naming_the_first_notes_secret(root: Path, remote: GitRemote, stepwise: Mirrors) -> list[str]:
    remote.commit({".env": f"{MARKER}\n"}, "Keep the first notes as settings")  # names the first blob
    assert stepwise.sync("app").ok
    fresh = make_mirrors(root / "fresh", [{"name": "app", "url": str(remote.bare), "branch": "main"}])
    assert fresh.sync("app").ok
    seen = answers(stepwise, CALLS)
    assert seen == answers(fresh, CALLS)
    return seen


def test_lineage_records_written_plain_by_an_earlier_version_are_still_read(
    tmp_path: Path,
) -> None:
    remote, entry = edited_notes(tmp_path)
    stepwise = make_mirrors(tmp_path / "stepwise", entry)
    assert stepwise.sync("app").ok
    mirror = tmp_path / "stepwise/data/repos/app/mirror.git"
    for name in RECORDS:  # as a data dir from before the records were compressed holds them
        (mirror / name).write_bytes(gzip.decompress((mirror / name).read_bytes()))

    seen = after_naming_the_first_notes_secret(tmp_path, remote, stepwise)

    assert "withheld: it descends from a secret file" in seen[0]
    assert not any(MARKER in text for text in seen)
    assert (mirror / "codebot-lineage-edges").read_bytes()[:2] == b"\x1f\x8b"  # rewritten with the new commit


def test_a_lost_edges_record_makes_the_next_sync_scan_the_whole_history_again(tmp_path: Path) -> None:
    remote, entry = edited_notes(tmp_path)
    stepwise = make_mirrors(tmp_path / "stepwise", entry)
    assert stepwise.sync("app").ok
    (tmp_path / "stepwise/data/repos/app/mirror.git/codebot-lineage-edges").write_bytes(b"\x1f\x8b damaged")

    seen = after_naming_the_first_notes_secret(tmp_path, remote, stepwise)

    assert "withheld: it descends from a secret file" in seen[0]  # the edit, known from a full rescan
    assert not any(MARKER in text for text in seen)
