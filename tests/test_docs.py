"""The docs a newcomer reads cannot drift from the code: the settings reference is generated,
the file map names every module, and the front page stays a front page."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
from pathlib import Path

from codebot.cli_parser import build_parser as _parser
from config.docgen import PAGE, rows, updated_page
from worker.agent import prompt_size
from worker.jobs import outcomes

ROOT = Path(__file__).resolve().parents[1]
FRONT_PAGE_MAX_LINES = 200


def test_the_settings_reference_is_what_config_settings_says() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert updated_page(page, rows()) == page, "docs/configuration.md is stale: run `python -m config.docgen`"


def test_every_setting_says_what_it_means() -> None:
    assert [row.variable for row in rows() if not row.meaning] == []


def test_the_file_map_names_every_module_and_only_modules_that_exist() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "bot", "codebot", "config", "worker"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    modules = {path for path in tracked if path.endswith(".py") and not path.endswith("__init__.py")}
    mapped = set(re.findall(r"^\| `([\w/]+\.py)` \|", (ROOT / "docs/architecture.md").read_text(), re.M))
    assert sorted(modules - mapped) == [], "modules missing from docs/architecture.md's file map"
    assert sorted(mapped - modules) == [], "docs/architecture.md maps files that do not exist"


def test_the_readme_stays_a_front_page() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= FRONT_PAGE_MAX_LINES


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# `codebot …` at the start of a snippet, after `$ `, variables set for it, or its path.
COMMAND_LINE = re.compile(
    r"\s*(?:\$ )?(?:[A-Z_]+=(?:\$\([^)]*\)|\S+) +)*(?:\S*/bin/)?(codebot [a-z](?:[^|;&#()×]|\|(?=\S)|(?<=\S)#)*)"
)
# A usage placeholder in the docs -> a value the parser takes.
PLACEHOLDERS = {
    "QUESTION": "how?",
    "NAME": "payments",
    "NAME...": "payments",
    "NAME…": "payments",
    "FILE.jsonl": "golden.jsonl",
    "JSON": "{}",
    "N": "2",
    "H": "127.0.0.1",
    "P": "8780",
}


def shown_command_lines() -> dict[str, str]:
    """Every `codebot …` command line in code (inline or fenced) in the docs -> where it is shown."""
    found: dict[str, str] = {}
    for path in DOCS:
        page = path.read_text(encoding="utf-8")
        fenced = re.findall(r"^ *```(?:sh|bash|console|shell|ini)?\n(.*?)^ *```", page, re.M | re.S)
        snippets = [line for block in fenced for line in block.splitlines()]
        snippets += re.findall(r"`([^`\n]+)`", re.sub(r"^ *```.*?^ *```", "", page, flags=re.M | re.S))
        for snippet in snippets:
            match = re.match(COMMAND_LINE, snippet)
            if match and "…" not in match.group(1).split()[1]:
                found.setdefault(match.group(1).strip(), path.name)
    return found


def as_arguments(line: str) -> list[str]:
    words = shlex.split(re.sub(r"\[([^]]*)\]", "", line))[1:]  # optional parts left out
    return [PLACEHOLDERS.get(word, word) for word in words if word not in ("...", "…")]


def test_every_codebot_command_line_the_docs_show_is_one_codebot_accepts() -> None:
    shown = shown_command_lines()
    assert len(shown) > 30 and "codebot web" in shown and "codebot feedback list" in shown
    refused = {}
    for line, where in shown.items():
        arguments = as_arguments(line)
        if all(re.fullmatch(r"[a-z]+", word) for word in arguments) and len(arguments) <= 2:
            arguments.append("--help")  # a command named in prose: it must exist
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                _parser().parse_args(arguments)
        except SystemExit as exc:
            if exc.code != 0:  # 0: --help
                refused[line] = where
        except ValueError as exc:  # not even one command line (unbalanced quotes)
            refused[line] = f"{where}: {exc}"
    assert refused == {}


def test_the_scripted_model_example_reads_and_cites_the_lines_it_names() -> None:
    page = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    read = re.search(r'"path": "bot/slack/handlers.py", "start_line": (\d+), "end_line": (\d+)', page)
    cited = re.search(r"\[codebot:bot/slack/handlers.py#L(\d+)-L(\d+)\]", page)
    assert read and cited
    lines = (ROOT / "bot" / "slack" / "handlers.py").read_text(encoding="utf-8").splitlines()
    where = next(n for n, line in enumerate(lines, 1) if "def on_command(" in line)
    assert int(read[1]) <= int(cited[1]) == where <= int(cited[2]) <= int(read[2])


def test_no_doc_names_a_path_of_one_machine() -> None:
    for path in DOCS:
        assert not re.search(r"(?<![\w.])/(?:work|home/\w+|Users/\w+)/", path.read_text(encoding="utf-8")), (
            path.name
        )


def test_the_outcomes_table_names_every_outcome_kind_and_its_exit_code() -> None:
    section = (ROOT / "docs/operations.md").read_text(encoding="utf-8").split("## Outcomes", 1)[1]
    rows = re.findall(r"^\| `(\w+)` \| .* \| (✅|⚠️|—) \| (\d|—) \|$", section.split("\n## ", 1)[0], re.M)
    assert [kind for kind, _mark, _code in rows] == list(outcomes.STATUSES)
    for kind, mark, code in rows:
        assert (mark == "✅") == (kind == "answered")
        assert code == str(outcomes.EXIT_CODES[kind]) if kind in outcomes.EXIT_CODES else code == "—"


def test_the_first_requests_size_in_the_models_page_is_what_the_code_sends() -> None:
    page = prompt_size.DOC.read_text(encoding="utf-8")
    assert prompt_size.documented(page) == prompt_size.section(), (
        "docs/models.md is stale: run `python -m worker.agent.prompt_size`"
    )
