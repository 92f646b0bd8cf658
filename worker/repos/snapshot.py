"""One immutable snapshot of one commit of one whitelisted repo: what a question reads.

A snapshot directory holds the commit's files as processed blobs (worker/repos/assemble.py):
redacted text, or a placeholder for a binary, oversized or withheld file; never `.git` and never
a secret file. Its metadata (file count, size, languages, top-level layout, README) is computed
once when the snapshot is made and stored beside it, so questions pay nothing for it.
"""

from __future__ import annotations

import json
import os
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
# 1: a raw `git archive` of the commit (never served: it was not redacted); 2: processed blobs;
# 3: and blobs secret by lineage withheld (a format-2 snapshot may show a renamed secret file);
# 4: and symlinks whose blob is secret withheld too (a format-3 snapshot may show its target).
SNAPSHOT_FORMAT = 4
README_NAMES = ("README.md", "README.rst", "README.txt", "README", "readme.md", "Readme.md")


@dataclass(frozen=True)
class SnapshotMeta:
    file_count: int = 0
    size_bytes: int = 0
    languages: dict[str, int] = field(default_factory=dict)  # language -> file count, most first
    top_level: tuple[str, ...] = ()  # root entries, directories with a trailing "/"
    readme: str | None = None  # path of the README at the root, if any
    withheld: int = 0  # files never shown: secret names, credentials by content, unprocessable
    oversized: int = 0  # files over blob_max_bytes: listed, content not kept

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
    # The git repository holding the commit and its history (the mirror), for the history tools;
    # None: no history to read.
    git_dir: Path | None = None

    @property
    def short_sha(self) -> str:
        return self.sha[:7]


def write_meta(path: Path, snapshot: Snapshot) -> None:
    """Store a snapshot's facts beside it (atomically: write then rename)."""
    record = {
        "format": SNAPSHOT_FORMAT,
        "sha": snapshot.sha,
        "branch": snapshot.branch,
        "created_at": snapshot.created_at,
        "committed_at": snapshot.committed_at,
        "meta": asdict(snapshot.meta),
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record), encoding="utf-8")
    os.replace(tmp, path)


def read_meta(path: Path, repo: RepoSpec, root: Path, git_dir: Path | None = None) -> Snapshot:
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
            withheld=meta.get("withheld", 0),
            oversized=meta.get("oversized", 0),
        ),
        git_dir=git_dir,
    )


def meta_format(path: Path) -> int:
    """The format a snapshot's metadata file records (1: a raw `git archive`, before processing)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    return int(record.get("format", 1)) if isinstance(record, dict) else 0
