"""Each repo's syncs read from the history database (worker/history/): every sync any machine
recorded (`codebot repos sync`, a refresh, a push, the schedule, a catch-up), success and
failure, for as long as the history keeps them, counted in SQL rather than from Redis's capped
list of the last syncs (which holds no catch-up at all)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, case, func, select

from worker.history import schema

s = schema.syncs


@dataclass(frozen=True)
class RepoSyncs:
    shown: list[dict[str, Any]]  # the newest syncs, newest first, as the page lists them
    total: int  # every sync of the repo the history holds
    failures: int
    last_error: str  # the newest sync's error when it failed; "" when it succeeded
    last_good_at: float | None
    last_good_host: str
    oldest_at: float | None  # the oldest sync held: the range the counts cover


NONE = RepoSyncs([], 0, 0, "", None, "", None)


def sync_entry(row: Any) -> dict[str, Any]:
    """One sync as the page shows it (the keys of Redis's list, plus what only the history has)."""
    return {
        "at": row.at,
        "when": time.strftime("%Y-%m-%d %H:%M", time.gmtime(row.at)),
        "ok": bool(row.ok),
        "sha": row.sha,
        "changed": bool(row.changed),
        "host": row.host,
        "origin": row.origin,
        "error": row.error,
        "error_kind": row.error_kind,
        "seconds": row.seconds,
        "size_bytes": row.size_bytes,
    }


def repo_syncs(engine: Engine, names: list[str], shown: int) -> dict[str, RepoSyncs]:
    """The syncs of each named repo; a repo with none recorded gets NONE."""
    failed = func.sum(case((s.c.ok.is_(False), 1), else_=0))
    found: dict[str, RepoSyncs] = {}
    with engine.connect() as connection:
        counts = {
            repo: (int(total), int(failures or 0), oldest)
            for repo, total, failures, oldest in connection.execute(
                select(s.c.repo, func.count(), failed, func.min(s.c.at))
                .where(s.c.repo.in_(names))
                .group_by(s.c.repo)
            )
        }
        for name, (total, failures, oldest) in counts.items():
            newest_first = select(s).where(s.c.repo == name).order_by(s.c.at.desc(), s.c.event_id.desc())
            entries = [sync_entry(row) for row in connection.execute(newest_first.limit(shown))]
            good = connection.execute(newest_first.where(s.c.ok.is_(True)).limit(1)).first()
            found[name] = RepoSyncs(
                shown=entries,
                total=total,
                failures=failures,
                last_error="" if entries[0]["ok"] else str(entries[0]["error"] or entries[0]["error_kind"]),
                last_good_at=good.at if good else None,
                last_good_host=good.host if good else "",
                oldest_at=oldest,
            )
    return {name: found.get(name, NONE) for name in names}
