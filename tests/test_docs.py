"""The docs a newcomer reads cannot drift from the code: the settings reference is generated,
the file map names every module, and the front page stays a front page."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from config.docgen import PAGE, rows, updated_page
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


def test_the_outcomes_table_names_every_outcome_kind_and_its_exit_code() -> None:
    section = (ROOT / "docs/operations.md").read_text(encoding="utf-8").split("## Outcomes", 1)[1]
    rows = re.findall(r"^\| `(\w+)` \| .* \| (✅|⚠️|—) \| (\d|—) \|$", section.split("\n## ", 1)[0], re.M)
    assert [kind for kind, _mark, _code in rows] == list(outcomes.STATUSES)
    for kind, mark, code in rows:
        assert (mark == "✅") == (kind == "answered")
        assert code == str(outcomes.EXIT_CODES[kind]) if kind in outcomes.EXIT_CODES else code == "—"
