"""One repo's folder under `<data_dir>/repos/<name>`: where its parts live, its `state.json`
(branch, history depth, last attempt and error), and the commit it serves now."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from worker.repos.locks import SnapshotFolder, is_sha

UNKNOWN = "unknown"  # state.json of a mirror made before history_depth was recorded


class RepoPaths:
    """Where one repo's mirror, snapshots, state and lock live, under `<data_dir>/repos/<name>`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.mirror = root / "mirror.git"
        self.snapshots = SnapshotFolder(root / "snapshots")
        self.current = root / "current"
        self.state = root / "state.json"
        self.refresh_lock = root / "refresh.lock"


def current_sha(paths: RepoPaths) -> str | None:
    try:
        sha = Path(os.readlink(paths.current)).name
    except OSError:
        return None
    return sha if is_sha(sha) else None


def read_state(paths: RepoPaths) -> dict[str, Any]:
    try:
        state = json.loads(paths.state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def write_state(paths: RepoPaths, state: dict[str, Any]) -> None:
    tmp = paths.state.with_name(f".state-{os.getpid()}-{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(state), encoding="utf-8")
    os.replace(tmp, paths.state)


def shorter_than(depth: int | None, before: object) -> bool:
    """Whether `depth` keeps less history than the depth recorded at the last good sync."""
    if before == UNKNOWN or depth is None:
        return False
    return before is None or (isinstance(before, int) and depth < before)
