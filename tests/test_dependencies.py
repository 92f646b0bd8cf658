"""Every third-party module codebot imports is a declared dependency in pyproject.toml.

A module that only arrives with another package (uvicorn with mcp, aiohttp with discord.py)
disappears the day that package drops it; `.ci/run` installs only what is declared.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OURS = {"codebot", "bot", "worker", "config", "tests"}


def imported_modules(folder: Path) -> dict[str, str]:
    """Top-level module -> the first file importing it, function-level imports included."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(folder.parent)))
    return found


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(*groups: str) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for group in groups:
        requirements += project["optional-dependencies"][group]
    return {normalized(re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0]) for requirement in requirements}


def undeclared(folders: list[Path], groups: tuple[str, ...]) -> list[str]:
    distributions = packages_distributions()
    wanted = declared(*groups)
    missing = []
    for folder in folders:
        for module, where in imported_modules(folder).items():
            if module in OURS or module in sys.stdlib_module_names or module == "__future__":
                continue
            owners = {normalized(d) for d in distributions.get(module, [])}
            if not owners & wanted:
                missing.append(f"{module} (imported in {where}; installed by {sorted(owners) or 'nothing'})")
    return missing


def test_every_module_the_product_imports_is_a_declared_dependency() -> None:
    assert undeclared([ROOT / name for name in ("codebot", "bot", "worker", "config")], ()) == []


def test_every_module_the_tests_import_is_declared_for_development() -> None:
    assert undeclared([ROOT / "tests"], ("dev",)) == []


def test_the_check_names_a_module_that_only_arrives_with_another_package(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "mod.py").write_text(
        "import json\nimport jinja2\nfrom . import sibling\n\ndef later():\n    import yaml\n",
        encoding="utf-8",
    )
    missing = undeclared([package], ())
    assert len(missing) == 1 and missing[0].startswith(
        "yaml (imported in pkg/mod.py; installed by ['pyyaml'])"
    )


def private_bases(folder: Path) -> list[str]:
    """Classes of ours built on another library's internals: a base imported from a module path
    with a private part (`_x`, `*_impl`), or a base whose own name is private."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        origin = {}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and (node.module or "").split(".")[0] not in OURS
            ):
                origin.update(
                    {alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names}
                )
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    dotted = origin.get(base.id, "") if isinstance(base, ast.Name) else ""
                    parts = dotted.split(".")
                    if any(p.startswith("_") or p.endswith("_impl") for p in parts):
                        found.append(f"{path.relative_to(folder.parent)}: {node.name}({dotted})")
    return found


def test_no_class_of_ours_subclasses_another_librarys_internals() -> None:
    assert [
        hit for name in ("codebot", "bot", "worker", "config") for hit in private_bases(ROOT / name)
    ] == []


def test_the_internals_check_names_a_subclass_of_a_private_module(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "server.py").write_text(
        "from uvicorn.protocols.http.h11_impl import H11Protocol\nfrom asyncio import Protocol\n\n"
        "class Mine(H11Protocol):\n    pass\n\nclass Fine(Protocol):\n    pass\n",
        encoding="utf-8",
    )
    assert private_bases(package) == ["pkg/server.py: Mine(uvicorn.protocols.http.h11_impl.H11Protocol)"]
