"""One immutable checkout of one commit of one whitelisted repo: what a question reads.

A snapshot directory holds the files of the commit and nothing else (no `.git`: it is made
with `git archive`). Its metadata (file count, size, languages, top-level layout, README) is
computed once when the snapshot is made and stored beside it, so questions pay nothing for it.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from config.repos import RepoSpec

LANGUAGES_BY_SUFFIX = {
    ".py": "Python",
    ".pyi": "Python",
    ".js": "JavaScript",
    ".mjs": "JavaScript",
    ".cjs": "JavaScript",
    ".jsx": "JavaScript",
    ".ts": "TypeScript",
    ".tsx": "TypeScript",
    ".go": "Go",
    ".rs": "Rust",
    ".java": "Java",
    ".kt": "Kotlin",
    ".kts": "Kotlin",
    ".scala": "Scala",
    ".rb": "Ruby",
    ".php": "PHP",
    ".c": "C",
    ".h": "C",
    ".cc": "C++",
    ".cpp": "C++",
    ".cxx": "C++",
    ".hpp": "C++",
    ".cs": "C#",
    ".swift": "Swift",
    ".m": "Objective-C",
    ".sh": "Shell",
    ".bash": "Shell",
    ".zsh": "Shell",
    ".sql": "SQL",
    ".html": "HTML",
    ".css": "CSS",
    ".scss": "CSS",
    ".vue": "Vue",
    ".svelte": "Svelte",
    ".ex": "Elixir",
    ".exs": "Elixir",
    ".erl": "Erlang",
    ".hs": "Haskell",
    ".lua": "Lua",
    ".dart": "Dart",
    ".r": "R",
    ".jl": "Julia",
    ".tf": "Terraform",
    ".proto": "Protocol Buffers",
    ".md": "Markdown",
    ".rst": "reStructuredText",
    ".toml": "TOML",
    ".yaml": "YAML",
    ".yml": "YAML",
    ".json": "JSON",
}
# Languages that describe code rather than data or prose come first in listings.
_NON_CODE = {"Markdown", "reStructuredText", "TOML", "YAML", "JSON"}
README_NAMES = ("README.md", "README.rst", "README.txt", "README", "readme.md", "Readme.md")


@dataclass(frozen=True)
class SnapshotMeta:
    file_count: int = 0
    size_bytes: int = 0
    languages: dict[str, int] = field(default_factory=dict)  # language -> file count, most first
    top_level: tuple[str, ...] = ()  # root entries, directories with a trailing "/"
    readme: str | None = None  # path of the README at the root, if any

    def main_languages(self, limit: int = 5) -> list[str]:
        code = [lang for lang in self.languages if lang not in _NON_CODE]
        rest = [lang for lang in self.languages if lang in _NON_CODE]
        return (code + rest)[:limit]


@dataclass(frozen=True)
class Snapshot:
    repo: RepoSpec
    sha: str
    branch: str
    root: Path  # the directory holding the commit's files
    created_at: float  # unix seconds: when this snapshot was made
    committed_at: float  # unix seconds: the commit's date
    meta: SnapshotMeta = field(default_factory=SnapshotMeta)

    @property
    def short_sha(self) -> str:
        return self.sha[:7]


def compute_meta(root: Path, hidden: Callable[[str], bool] = lambda _name: False) -> SnapshotMeta:
    """Walk a snapshot once: counts, sizes and languages (symlinks are not followed).

    `hidden` names root entries never to list (secret files): the layout goes into the system
    prompt and `repo_overview`, and even a secret file's name is not the model's business.
    """
    files = 0
    size = 0
    languages: Counter[str] = Counter()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                stat = os.lstat(path)
            except OSError:
                continue
            files += 1
            size += stat.st_size
            language = LANGUAGES_BY_SUFFIX.get(os.path.splitext(name)[1].lower())
            if language:
                languages[language] += 1
    top = sorted(
        (entry.name + "/" if entry.is_dir(follow_symlinks=False) else entry.name)
        for entry in os.scandir(root)
        if entry.name != ".git" and not hidden(entry.name)
    )
    readme = next(
        (name for name in README_NAMES if (root / name).is_file() and not (root / name).is_symlink()), None
    )
    return SnapshotMeta(
        file_count=files,
        size_bytes=size,
        languages=dict(languages.most_common()),
        top_level=tuple(top),
        readme=readme,
    )


def write_meta(path: Path, snapshot: Snapshot) -> None:
    """Store a snapshot's facts beside it (atomically: write then rename)."""
    record = {
        "sha": snapshot.sha,
        "branch": snapshot.branch,
        "created_at": snapshot.created_at,
        "committed_at": snapshot.committed_at,
        "meta": asdict(snapshot.meta),
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record), encoding="utf-8")
    os.replace(tmp, path)


def read_meta(path: Path, repo: RepoSpec, root: Path) -> Snapshot:
    record = json.loads(path.read_text(encoding="utf-8"))
    meta = record.get("meta", {})
    return Snapshot(
        repo=repo,
        sha=record["sha"],
        branch=record["branch"],
        root=root,
        created_at=float(record["created_at"]),
        committed_at=float(record["committed_at"]),
        meta=SnapshotMeta(
            file_count=meta.get("file_count", 0),
            size_bytes=meta.get("size_bytes", 0),
            languages=dict(meta.get("languages", {})),
            top_level=tuple(meta.get("top_level", ())),
            readme=meta.get("readme"),
        ),
    )
