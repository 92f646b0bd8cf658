"""Real third-party source for bench/navigation.py, fetched at run time from the registries this
project can reach (PyPI, npm, Debian), with their ordinary clients, into a cache folder.

One package per language (Kotlin and Swift share one npm package); versions are pinned so two
runs read the same code. Nothing fetched is committed: the cache is a temp folder, or --cache.

No registry reached here ships a Scala project's sources (Debian's source pool answers 404
through this network, Maven is not reachable), so Scala's corpus is a public repository at a
pinned commit, read from a local git mirror of it (`--mirrors DIR`: DIR/owner+name/repo, the
layout of a mirror fetched from the forge). Without the mirror, Scala falls back to the Scala
examples Pygments' sdist ships (a small sample).
"""

from __future__ import annotations

import io
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
    Source("Scala", "git", "com-lihaoyi/fastparse", "385431ec271b411505a9458bf8f85d489a9b001b", ("scala",)),
    Source("Shell", "deb", "dracut-core", "", ("bash",)),
]


# What a language falls back to when its source cannot be had here (a git mirror not present).
FALLBACKS = {"Scala": Source("Scala", "pypi", "pygments", "2.18.0", ("scala",))}


class Unavailable(RuntimeError):
    """The source cannot be had on this machine (not an error of the bench)."""


def _run(command: list[str], cwd: Path) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()[-600:]}")


def _extract_all(archives: list[Path], into: Path) -> None:
    for archive in archives:
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")


def _extract_commit(source: Source, mirrors: Path | None, into: Path) -> None:
    git_dir = (mirrors / source.package.replace("/", "+") / "repo") if mirrors else None
    if git_dir is None or not git_dir.is_dir():
        raise Unavailable(f"no git mirror of {source.package} (--mirrors DIR: DIR/owner+name/repo)")
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "--git-dir", str(git_dir), "archive", "--format=tar", source.version],
        capture_output=True, timeout=300,
    )  # fmt: skip
    if archive.returncode != 0:
        raise Unavailable(f"{source.package}@{source.version[:12]}: {archive.stderr.decode()[-300:].strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")


def _download(source: Source, folder: Path, mirrors: Path | None) -> None:
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
    elif source.registry == "git":
        _extract_commit(source, mirrors, folder / "src")
    elif source.registry == "deb":
        _run(["apt-get", "download", "-qq", source.package], downloads)
        for deb in sorted(downloads.glob("*.deb")):
            _run(["dpkg-deb", "-x", str(deb), str(folder / "src")], folder)
    else:
        raise ValueError(source.registry)


def fetch(source: Source, cache: Path, mirrors: Path | None = None) -> Path:
    """The folder holding the extracted package (fetched once per cache). Unavailable when a git
    source has no mirror here."""
    slug = source.package.replace("/", "+")
    folder = cache / f"{source.registry}-{slug}-{source.version[:12] or 'debian'}"
    done = folder / ".done"
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)
        _download(source, folder, mirrors)
        done.touch()
    return folder / "src"


def fetch_or_fallback(source: Source, cache: Path, mirrors: Path | None) -> tuple[Source, Path]:
    """The source and its folder; its fallback's when it cannot be had here."""
    try:
        return source, fetch(source, cache, mirrors)
    except Unavailable as exc:
        fallback = FALLBACKS.get(source.language)
        if fallback is None:
            raise
        print(f"{source.language}: {exc}; using {fallback.registry} {fallback.package}", file=sys.stderr)
        return fallback, fetch(fallback, cache, mirrors)
