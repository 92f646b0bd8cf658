"""Real third-party source for bench/navigation.py, fetched at run time from the registries this
project can reach (PyPI, npm, Debian), with their ordinary clients, into a cache folder.

One package per language (Kotlin and Swift share one npm package); versions are pinned so two
runs read the same code. Nothing fetched is committed: the cache is a temp folder, or --cache.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Source:
    language: str  # as the grammars name it (worker/repos/symbol_grammars.py)
    registry: str  # pypi (an sdist), npm (a package tarball), deb (a binary package shipping sources)
    package: str
    version: str
    grammars: tuple[str, ...]  # the grammar keys whose files belong to this language's corpus


SOURCES = [
    Source("Python", "pypi", "requests", "2.32.3", ("python",)),
    Source("JavaScript", "npm", "axios", "1.7.9", ("javascript",)),
    Source("TypeScript", "npm", "rxjs", "7.8.1", ("typescript", "tsx")),
    Source("Go", "deb", "golang-github-spf13-cobra-dev", "", ("go",)),
    Source("Java", "pypi", "JPype1", "1.5.1", ("java",)),
    Source("Kotlin", "npm", "expo-modules-core", "2.1.1", ("kotlin",)),
    Source("C#", "pypi", "pythonnet", "3.0.5", ("csharp",)),
    Source("C", "pypi", "psutil", "6.1.0", ("c", "h")),
    Source("C++", "pypi", "greenlet", "3.1.1", ("cpp", "h")),
    Source("Rust", "deb", "librust-regex-syntax-dev", "", ("rust",)),
    Source("Ruby", "deb", "ruby-thor", "", ("ruby",)),
    Source("PHP", "deb", "php-symfony-console", "", ("php",)),
    Source("Swift", "npm", "expo-modules-core", "2.1.1", ("swift",)),
    # No registry reached here ships a Scala project's sources (Debian's source pool answers 404
    # through this network): Pygments' Scala example files are the third-party Scala at hand.
    Source("Scala", "pypi", "pygments", "2.18.0", ("scala",)),
    Source("Shell", "deb", "dracut-core", "", ("bash",)),
]


def _run(command: list[str], cwd: Path) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()[-600:]}")


def _extract_all(archives: list[Path], into: Path) -> None:
    for archive in archives:
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")


def _download(source: Source, folder: Path) -> None:
    downloads = folder / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    if source.registry == "pypi":
        spec = f"{source.package}=={source.version}"
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", source.package,
              "-d", str(downloads), spec], folder)  # fmt: skip
        _extract_all(sorted(downloads.glob("*.tar.gz")), folder / "src")
    elif source.registry == "npm":
        _run(["npm", "pack", "--silent", f"{source.package}@{source.version}", "--pack-destination",
              str(downloads)], folder)  # fmt: skip
        _extract_all(sorted(downloads.glob("*.tgz")), folder / "src")
    elif source.registry == "deb":
        _run(["apt-get", "download", "-qq", source.package], downloads)
        for deb in sorted(downloads.glob("*.deb")):
            _run(["dpkg-deb", "-x", str(deb), str(folder / "src")], folder)
    else:
        raise ValueError(source.registry)


def fetch(source: Source, cache: Path) -> Path:
    """The folder holding the extracted package (fetched once per cache)."""
    folder = cache / f"{source.registry}-{source.package}-{source.version or 'debian'}"
    done = folder / ".done"
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)
        _download(source, folder)
        done.touch()
    return folder / "src"
