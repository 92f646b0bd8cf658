"""What a question's tool calls hand on: the text the model reads, and nothing it does not."""

from __future__ import annotations

from pathlib import Path

from config.settings import load_settings
from tests.support.fixture_repos import Corpus, make_repo, snapshot_repo
from worker.tools import build_registry, make_context
from worker.tools.registry import inert


def test_a_questions_tool_results_are_their_text_alone_the_same_text_codebot_tool_shows(
    corpus: Corpus,
) -> None:
    settings = load_settings(env_file=None)
    registry = build_registry()
    calls = [
        ("read_file", {"repo": "app", "path": "src/app.py", "start_line": 1, "end_line": 5}),
        ("list_files", {"repo": "app", "path": "src"}),
        ("search", {"pattern": "retry", "repo": "app"}),
    ]
    for name, arguments in calls:
        snapshots = {"app": corpus.snapshots["app"]}
        shown = registry.call(make_context(settings, snapshots), name, arguments)
        asked = registry.call(make_context(settings, snapshots, keep_data=False), name, arguments)
        assert asked.ok and asked.text == shown.text
        assert shown.data and asked.data == {}  # `codebot tool --json` keeps it; a question never makes it


def test_every_control_character_but_tab_and_newline_is_stripped_from_what_a_tool_returns(
    tmp_path: Path,
) -> None:
    # an escape sequence, BEL, a lone CR, DEL and two C1 controls (NEL, 8-bit CSI); a NUL would
    # make it a binary file
    make_repo(tmp_path / "src", {"notes.txt": "a\tbc\x1b[2Jd\x07e\rf\x7fg\x85h\x9bi\u00a0j\n"})
    snapshot = snapshot_repo(tmp_path / "src", "notes", tmp_path / "base" / "snapshots" / "notes")
    ctx = make_context(load_settings(env_file=None), {"notes": snapshot}, keep_data=False)
    outcome = build_registry().call(ctx, "read_file", {"repo": "notes", "path": "notes.txt"})
    assert outcome.ok and "1│ a\tbc[2Jdefghi\u00a0j" in outcome.text.splitlines()
    every = "".join(map(chr, range(0x100)))
    assert inert(every) == "\t\n" + "".join(map(chr, [*range(0x20, 0x7F), *range(0xA0, 0x100)]))
