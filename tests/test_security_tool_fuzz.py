"""Fuzzing every tool the model gets: whatever arguments arrive, nothing from outside the snapshot
and no secret comes back, and every call ends in a result or an error the model can act on.

The arguments are generated per tool from its schema (so a tool added to the registry is fuzzed
too) and per parameter name: hostile paths built from the fortress's escaping links, traversal
segments, encodings, NUL, lone surrogates and over-long names; globs and ripgrep regexes made to
reach secret files; line numbers of any size and sign; and, through `registry.call` with raw
JSON text, every JSON type in every parameter, unknown parameters and malformed JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from config.settings import Settings, load_settings
from tests.support.attacks import FUZZ, NUMBERS, REGISTRY, raw_arguments, tool_calls
from tests.support.fortress import Fortress, LeakFinder, app_links, build_fortress
from worker.tools import ToolContext, ToolOutcome, make_context
from worker.tools.context import ToolError
from worker.tools.paths import resolve_path

# Settings that make every cut happen on small inputs: streamed reads, cut lines and outputs.
TIGHT = {
    "read_cache_max_file_bytes": 2048,
    "tool_output_max_chars": 1500,
    "read_max_chars": 900,
    "read_max_lines": 25,
    "read_max_line_chars": 40,
    "search_max_line_chars": 40,
    "search_max_results": 5,
    "list_max_entries": 4,
    "overview_readme_chars": 30,
}


@pytest.fixture(scope="module")
def fortress(tmp_path_factory: pytest.TempPathFactory) -> Fortress:
    return build_fortress(tmp_path_factory.mktemp("fortress"))


@pytest.fixture(scope="module")
def finder(fortress: Fortress) -> LeakFinder:
    return LeakFinder(fortress)


@pytest.fixture(scope="module")
def profiles() -> dict[str, Settings]:
    return {"default": load_settings(env_file=None), "tight": load_settings(env_file=None, **TIGHT)}


# --- the properties ------------------------------------------------------------------------------


def check(
    outcome: ToolOutcome, ctx: ToolContext, fortress: Fortress, finder: LeakFinder, call: object
) -> None:
    assert isinstance(outcome, ToolOutcome), call
    everything = outcome.text + "\n" + json.dumps(outcome.data, ensure_ascii=False)
    assert not finder(everything), (call, finder(everything))
    assert outcome.ok != outcome.text.startswith("Error: "), call
    assert "failed unexpectedly" not in outcome.text, (call, outcome.text)
    assert len(outcome.text) <= ctx.settings.tool_output_max_chars, (call, len(outcome.text))
    # Only lines of real, readable files of the snapshot are ever recorded as shown (citable).
    for repo, path in ctx.shown.files():
        assert repo == "app", call
        absolute, _ = resolve_path(fortress.app, path, ctx.settings)
        assert absolute.is_file(), (call, path)


@FUZZ
@given(data=st.data())
def test_any_sequence_of_calls_to_any_tool_leaks_nothing_and_always_answers(
    data: st.DataObject, fortress: Fortress, finder: LeakFinder, profiles: dict[str, Settings]
) -> None:
    profile = data.draw(st.sampled_from(sorted(profiles)), label="profile")
    ctx = make_context(profiles[profile], {"app": fortress.app})  # the sibling is never in scope
    for call in data.draw(st.lists(tool_calls(fortress), min_size=1, max_size=4), label="calls"):
        outcome = REGISTRY.call(ctx, *call)
        event(f"{call[0]} {'ok' if outcome.ok else outcome.text[:25]}")
        check(outcome, ctx, fortress, finder, call)


@FUZZ
@given(data=st.data())
def test_raw_json_of_any_shape_comes_back_as_an_error_the_model_can_act_on(
    data: st.DataObject, fortress: Fortress, finder: LeakFinder, profiles: dict[str, Settings]
) -> None:
    ctx = make_context(profiles["default"], {"app": fortress.app})
    call = data.draw(raw_arguments(fortress), label="call")
    check(REGISTRY.call(ctx, *call), ctx, fortress, finder, call)


@FUZZ
@given(
    path=st.sampled_from(["big/log.txt", "src/clients.py", "docs/keys.md", "src/long_lines.py", "README.md"]),
    start=NUMBERS,
    end=st.one_of(st.none(), NUMBERS),
    profile=st.sampled_from(["default", "tight"]),
)
def test_line_ranges_of_any_size_and_sign_are_clamped_or_explained_never_a_secret(
    path: str,
    start: int,
    end: int | None,
    profile: str,
    fortress: Fortress,
    finder: LeakFinder,
    profiles: dict[str, Settings],
) -> None:
    ctx = make_context(profiles[profile], {"app": fortress.app})
    arguments: dict[str, Any] = {"repo": "app", "path": path, "start_line": start, "end_line": end}
    outcome = REGISTRY.call(ctx, "read_file", arguments)
    check(outcome, ctx, fortress, finder, arguments)
    if not outcome.ok:
        assert "start_line" in outcome.text or "end_line" in outcome.text
        return
    shown = [row["line"] for row in outcome.data["lines"]]
    assert shown == list(range(max(1, start), max(1, start) + len(shown)))
    assert shown and shown[-1] <= outcome.data["total_lines"] and (end is None or shown[-1] <= end)
    assert ctx.shown.covers("app", path, shown[0], shown[-1])


# --- every way out, named ----------------------------------------------------------------------------

ESCAPES = [
    link
    for link, target in app_links(Path("/x")).items()
    if target.startswith("/") or target.startswith("..") or "hop" in link or "escape" in link
]


@pytest.mark.parametrize("link", ESCAPES)
def test_every_escaping_link_is_refused_by_every_tool_that_takes_a_path(
    link: str, fortress: Fortress, finder: LeakFinder
) -> None:
    ctx = make_context(load_settings(env_file=None), {"app": fortress.app})
    for name, arguments in [
        ("read_file", {"repo": "app", "path": link}),
        ("read_file", {"repo": "app", "path": f"{link}/notes.txt"}),
        ("read_file", {"repo": "app", "path": f"{link}/CANARY.txt"}),
        ("list_files", {"repo": "app", "path": link}),
        ("list_files", {"repo": "app", "path": link, "glob": "*"}),
    ]:
        outcome = REGISTRY.call(ctx, name, arguments)
        check(outcome, ctx, fortress, finder, (name, arguments))
        assert not outcome.ok and ("outside the repo" in outcome.text or "does not exist" in outcome.text)


@pytest.mark.parametrize(
    "path",
    [
        ".env",
        ".ENV",
        ".env.production",
        "nested/deeper/.ENV",
        "config/server.pem",
        "id_rsa",
        "keys/deploy.key",
        ".npmrc",
        "cloud/credentials.json",
        "config/.env.d/database.txt",
        "env_alias.txt",
        "pem_alias.txt",
        "envd_alias/database.txt",
    ],
)
def test_secret_files_are_refused_however_they_are_reached_even_when_ignore_files_unignore_them(
    path: str, fortress: Fortress, finder: LeakFinder
) -> None:
    ctx = make_context(load_settings(env_file=None), {"app": fortress.app})
    outcome = REGISTRY.call(ctx, "read_file", {"repo": "app", "path": path})
    # Refused by name, or absent: a link to a secret file never enters the snapshot.
    assert not outcome.ok and ("secret file pattern" in outcome.text or "does not exist" in outcome.text)
    tail = fortress.planted.in_secret_files.get(path, "SECRETFILE")[-10:]  # shorter than a leak
    for pattern, glob in [(tail, None), ("SECRETFILE", None), ("SECRETFILE", path), ("password", "**")]:
        found = REGISTRY.call(ctx, "search", {"pattern": pattern, **({"glob": glob} if glob else {})})
        check(found, ctx, fortress, finder, (pattern, glob))
        assert found.data.get("total", 0) == 0, (pattern, glob)


def test_the_sibling_repo_is_unknown_to_a_question_that_has_only_app_in_scope(
    fortress: Fortress, finder: LeakFinder
) -> None:
    ctx = make_context(load_settings(env_file=None), {"app": fortress.app})
    for name in REGISTRY.names():
        if "repo" not in REGISTRY.tools[name].types:
            continue
        arguments = {
            "repo": "sibling",
            "path": "notes.txt",
            "pattern": "SIBLING",
            "symbol": "KEY",
            "sha": "HEAD",
            "from": "HEAD",
        }
        wanted = {k: v for k, v in arguments.items() if k in REGISTRY.tools[name].types}
        outcome = REGISTRY.call(ctx, name, wanted)
        check(outcome, ctx, fortress, finder, (name, wanted))
        assert not outcome.ok and "repo 'sibling' is not available" in outcome.text
        assert "Repos in scope: app" in outcome.text


def test_a_repo_out_of_scope_gets_the_same_tool_answer_as_a_repo_that_does_not_exist(
    fortress: Fortress,
) -> None:
    ctx = make_context(load_settings(env_file=None), {"app": fortress.app})
    for name in REGISTRY.names():
        if "repo" not in REGISTRY.tools[name].types:
            continue
        answers = []
        for repo in ("sibling", "nowhere"):  # `sibling` exists, in another scope; `nowhere` does not
            arguments = {"repo": repo, "path": "notes.txt", "pattern": "x", "symbol": "KEY", "sha": "HEAD"}
            outcome = REGISTRY.call(
                ctx, name, {k: v for k, v in arguments.items() if k in REGISTRY.tools[name].types}
            )
            answers.append((outcome.ok, outcome.text.replace(repo, "NAME"), outcome.data))
        assert answers[0] == answers[1], name


def test_a_search_never_shows_a_piece_of_a_secret_that_a_line_cut_would_expose(
    fortress: Fortress, finder: LeakFinder
) -> None:
    # src/long_lines.py: a long JWT, then a GitHub token far along the same line, which search
    # cuts at `search_max_line_chars`: whatever the cut, no piece of either shows.
    for limit in (20, 100, 200, 300, 400, 600):
        ctx = make_context(load_settings(env_file=None, search_max_line_chars=limit), {"app": fortress.app})
        outcome = REGISTRY.call(ctx, "search", {"pattern": "x{20}", "glob": "*.py"})
        check(outcome, ctx, fortress, finder, limit)
        assert outcome.data["total"] >= 1
        # The tokens were redacted at rest: no pattern finds them.
        assert REGISTRY.call(ctx, "search", {"pattern": "eyJ|ghp_"}).data["total"] == 0


def test_a_jwt_is_redacted_whole_including_its_signature(fortress: Fortress, finder: LeakFinder) -> None:
    ctx = make_context(load_settings(env_file=None), {"app": fortress.app})
    outcome = REGISTRY.call(ctx, "read_file", {"repo": "app", "path": "src/long_lines.py"})
    assert outcome.ok and "[REDACTED:json-web-token]" in outcome.text
    assert fortress.planted.in_source["jwt-signature"] not in outcome.text
    check(outcome, ctx, fortress, finder, "jwt")


def test_unreadable_names_are_explained_not_crashes(fortress: Fortress) -> None:
    ctx = make_context(load_settings(env_file=None), {"app": fortress.app})
    cases = {
        ("read_file", "path", "a" * 300): "no file has a name that long",
        ("read_file", "path", "é" * 200): "no file has a name that long",  # 400 bytes
        ("list_files", "path", ("\U0001d538" * 60 + "/") * 14): "no file has a name that long",  # 3.4 KB
        ("read_file", "path", "\ud800"): "not valid text",
        ("list_files", "path", "src/\ud800"): "not valid text",
        ("search", "pattern", "x\x00"): "NUL byte",
        ("search", "pattern", "\ud800"): "not valid text",
        ("search", "glob", "\x00"): "NUL byte",
        ("search", "glob", "*" * 5000): "glob is longer than",
        ("list_files", "glob", "*" * 5000): "glob is longer than",
    }
    for (name, param, value), expected in cases.items():
        arguments = {"pattern": "x", param: value} if name == "search" else {"repo": "app", param: value}
        outcome = REGISTRY.call(ctx, name, arguments)
        assert not outcome.ok and expected in outcome.text, (name, param, outcome.text[:200])
    nested = REGISTRY.call(ctx, "read_file", "[" * 100_000)
    assert nested.text == "Error: the arguments are nested too deeply; send a flat JSON object"


def test_a_tool_error_echoing_a_huge_argument_is_cut_to_the_output_limit(fortress: Fortress) -> None:
    ctx = make_context(load_settings(env_file=None, tool_output_max_chars=600), {"app": fortress.app})
    outcome = REGISTRY.call(ctx, "x" * 50_000, {})
    assert not outcome.ok and len(outcome.text) <= 600 and outcome.text.endswith("…[error message cut]")


def test_the_path_gate_itself_refuses_every_way_out_with_an_error_to_act_on(fortress: Fortress) -> None:
    settings = load_settings(env_file=None)
    for path in ["../NEXTDOOR.txt", "/etc/passwd", "src/../../outside", ".git/HEAD", "x\x00"]:
        with pytest.raises(ToolError):
            resolve_path(fortress.app, path, settings)
