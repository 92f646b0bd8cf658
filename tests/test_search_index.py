"""The search index: a search reads only the files that can match, and answers exactly as the
plain ripgrep walk over the same snapshots does (a differential test over generated patterns)."""

from __future__ import annotations

import random
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config.settings import Settings, load_settings
from tests.support.fixture_repos import make_repo, snapshot_repo
from tests.support.git_remote import GitRemote, mirrors_for
from worker.repos.search_index.build import index_snapshot
from worker.repos.search_index.planner import fts_expression, plan
from worker.repos.search_index.store import candidate_paths, connect_for_reading, index_file
from worker.repos.snapshot import Snapshot
from worker.tools import build_registry, make_context, search_indexed
from worker.tools.search_indexed import UNNARROWED_NOTE

WORDS = ["retry", "Retry_job", "KELVIN", "\u212aelvin", "mask", "\u017fask", "x.y(z)", "a+b", "déjà", "[q]"]
GLOBS = [None, "*.py", "!*.txt", "sub/**", "*.{py,md}", "**/deep/*"]


def _text(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(0, 6)):
        lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4))))
    return "\n".join(lines) + "\n"


def _files(seed: int) -> dict[str, str | bytes]:
    rng = random.Random(seed)
    names = ["a.py", "b.txt", "sub/c.py", "sub/deep/d.md", "README.md", "gen/out.py", "x y.py", "é.txt"]
    files: dict[str, str | bytes] = {
        name: _text(rng) for name in rng.sample(names, rng.randint(3, len(names)))
    }
    files[".gitignore"] = "gen/\n"
    files["latin1.txt"] = "retry caf\xe9 mask\n".encode("latin-1")
    files["utf16.txt"] = "\ufeffretry KELVIN\n".encode("utf-16-le")
    files["logo.bin"] = b"retry\x00mask KELVIN\x00"  # binary: a placeholder in the snapshot
    files["big.py"] = "retry mask Retry_job KELVIN\n" * 20  # over search_max_file_bytes: never read
    return files


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, dict[str, Snapshot]]:
    base = tmp_path_factory.mktemp("index")
    indexed = load_settings(
        env_file=None, data_dir=base / "data", search_max_results=1000, search_max_file_bytes=400
    )
    snapshots = {}
    for seed, name in enumerate(["alpha", "beta", "gamma", "delta"]):
        make_repo(base / "origin" / name, _files(seed))
        root = base / "repos" / name / "snapshots" / "s"
        snapshots[name] = snapshot_repo(base / "origin" / name, name, root, settings=indexed)
        assert index_snapshot(indexed, name, root)
    return indexed, snapshots


def _search(settings: Settings, snapshots: dict[str, Snapshot], **args: Any) -> tuple[str, dict[str, Any]]:
    outcome = build_registry().call(make_context(settings, snapshots), "search", args)
    return outcome.text, outcome.data or {}


def _plain(settings: Settings, tmp: Path) -> Settings:
    """The same settings over a data dir without an index: today's walk of every file."""
    return settings.model_copy(update={"data_dir": tmp})


_LITERAL = st.sampled_from(
    ["retry", "Retry", "job", "elvin", "KEL", "mask", "ask", "y(z", "a+b", "déj", "[q", "é"]
)
_ATOM = st.one_of(
    _LITERAL.map(lambda s: "".join("\\" + c if c in "()[]+.{}" else c for c in s)),
    st.sampled_from(
        [".", "\\w", "\\d", "\\s", "\\b", "^", "$", "[a-k]", "[^x]", "[[:alpha:]]", "\\<", "\\p{L}", "\\x41"]
    ),
)


def _combine(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.lists(inner, min_size=2, max_size=3).map("".join),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: "(" + "|".join(xs) + ")"),
        st.tuples(inner, st.sampled_from(["?", "*", "+", "{1,2}", "{2}", "+?"])).map("".join),
        inner.map(lambda x: f"(?i:{x})"),
        inner.map(lambda x: f"(?:{x})"),
        inner.map(lambda x: f"(?i){x}"),
    )


PATTERNS = st.recursive(_ATOM, _combine, max_leaves=6)


def _same_answer(
    corpus: tuple[Settings, dict[str, Snapshot]], tmp: Path, pattern: str, glob: str | None, caseless: bool
) -> None:
    indexed, snapshots = corpus
    args = {"pattern": pattern, "glob": glob, "ignore_case": caseless}
    text, data = _search(indexed, snapshots, **args)
    plain_text, plain_data = _search(_plain(indexed, tmp), snapshots, **args)
    assert data.get("matches") == plain_data.get("matches"), pattern
    assert data.get("total") == plain_data.get("total")
    assert text.replace(UNNARROWED_NOTE + "\n", "") == plain_text, pattern


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(pattern=PATTERNS, glob=st.sampled_from(GLOBS), caseless=st.booleans())
def test_an_indexed_search_answers_exactly_as_the_plain_walk(
    corpus: tuple[Settings, dict[str, Snapshot]],
    tmp_path_factory: pytest.TempPathFactory,
    pattern: str,
    glob: str | None,
    caseless: bool,
) -> None:
    _same_answer(corpus, tmp_path_factory.getbasetemp() / "none", pattern, glob, caseless)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # ~0.5 s an example on 2 loaded cores
@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(pattern=PATTERNS, glob=st.sampled_from(GLOBS), caseless=st.booleans())
def test_thousands_of_generated_patterns_answer_exactly_as_the_plain_walk(
    corpus: tuple[Settings, dict[str, Snapshot]],
    tmp_path_factory: pytest.TempPathFactory,
    pattern: str,
    glob: str | None,
    caseless: bool,
) -> None:
    _same_answer(corpus, tmp_path_factory.getbasetemp() / "none", pattern, glob, caseless)


def test_a_pattern_the_index_cannot_narrow_says_that_every_file_was_read(
    corpus: tuple[Settings, dict[str, Snapshot]],
) -> None:
    indexed, snapshots = corpus
    text, data = _search(indexed, snapshots, pattern="e.", ignore_case=True)
    assert data["index"] == "unnarrowed" and UNNARROWED_NOTE in text
    text, data = _search(indexed, snapshots, pattern="Retry_job")
    assert data["index"] == "narrowed" and UNNARROWED_NOTE not in text
    assert {m["repo"] for m in data["matches"]} <= set(snapshots) and data["total"] > 0


def processes_started(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the programs started from now on (the real ones run: this only counts them)."""
    started: list[str] = []
    real_popen = subprocess.Popen

    def counted(command: list[str], *args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(Path(command[0]).name)
        return real_popen(command, *args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", counted)
    return started


def test_an_org_wide_search_reads_the_candidates_of_every_repo_with_one_ripgrep(
    corpus: tuple[Settings, dict[str, Snapshot]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    indexed, snapshots = corpus
    started = processes_started(monkeypatch)
    # "codebot" is in every placeholder (logo.bin), "retry" in the ignored gen/ and the big file
    text, data = _search(indexed, snapshots, pattern="retry|codebot")
    assert started == ["rg"]
    monkeypatch.undo()
    plain_text, plain_data = _search(_plain(indexed, tmp_path), snapshots, pattern="retry|codebot")
    assert data["matches"] == plain_data["matches"] and text == plain_text
    assert len({m["repo"] for m in data["matches"]}) == len(snapshots)
    assert not {m["path"] for m in data["matches"]} & {"logo.bin", "big.py", "gen/out.py"}


def test_candidates_too_many_for_one_command_line_are_split_over_several_ripgreps(
    corpus: tuple[Settings, dict[str, Snapshot]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    indexed, snapshots = corpus
    monkeypatch.setattr(search_indexed, "_ARGV_BYTES", 1)  # one path per command line
    started = processes_started(monkeypatch)
    text, data = _search(indexed, snapshots, pattern="retry")
    monkeypatch.undo()
    plain_text, plain_data = _search(_plain(indexed, tmp_path), snapshots, pattern="retry")
    assert len(started) > len(snapshots)  # more rg processes than repos: one per path
    assert data["matches"] == plain_data["matches"] and text == plain_text


def test_a_refresh_indexes_only_the_content_that_changed(tmp_path: Path) -> None:
    files = {f"src/m{i}.py": f"def handler_{i}():\n    return {i}\n" for i in range(6)}
    remote = GitRemote.create(tmp_path / "remote", files=files)
    mirrors = mirrors_for(tmp_path, remote)
    assert mirrors.sync("app").ok
    blobs = sqlite3.connect(index_file(mirrors.settings)).execute("SELECT count(*) FROM blobs")
    first = blobs.fetchone()[0]
    assert first == len(files)
    remote.commit({"src/m0.py": "def handler_zero():\n    return 0\n"})
    assert mirrors.sync("app").ok
    again = sqlite3.connect(index_file(mirrors.settings)).execute("SELECT count(*) FROM blobs").fetchone()[0]
    assert again == first + 1  # the one changed file; the five others were not read again
    with mirrors.lease(["app"]) as snapshots:
        _, data = _search(mirrors.settings, snapshots, pattern="handler_zero")
    assert data["index"] == "narrowed" and [m["path"] for m in data["matches"]] == ["src/m0.py"]


def test_a_redacted_secret_is_not_in_the_index(tmp_path: Path) -> None:
    token = "ghp_" + "".join(random.Random(7).choice("abcdefghijkmnopqrstuvwxyz23456789") for _ in range(36))
    settings = load_settings(env_file=None, data_dir=tmp_path / "data")
    make_repo(tmp_path / "origin", {"config.py": f"TOKEN = '{token}'\nname = 'visible_name'\n"})
    root = tmp_path / "repos" / "app" / "snapshots" / "s"
    snapshot_repo(tmp_path / "origin", "app", root, settings=settings)
    assert index_snapshot(settings, "app", root)
    db = connect_for_reading(settings)
    assert db is not None
    ids = [row[0] for row in db.execute("SELECT id FROM snapshots")]
    for literal, found in ((token[4:], 0), ("visible_name", 1)):
        query = plan(literal, ignore_case=False)
        assert query is not None
        assert len(candidate_paths(db, ids, fts_expression(query))) == found
