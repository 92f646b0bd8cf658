"""`codebot repos sync [NAME...]` and `codebot repos list`: the mirrors as an operator sees them.

The lead's CLI parses arguments and calls these; they print to the given console and return
the exit code (0 ok, 1 some repo failed to sync, 2 a name not in the whitelist).

Each sync is recorded as an admin refresh is (worker/repos/refresh.py, `record_refresh`, origin
`cli`): the commit every machine should serve, the console's list of syncs and the history's
event, success or failure. Without Redis (the embedded one not running: a sync starts none) the
sync still runs, and says it was not recorded.
"""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor

from redis import Redis
from redis.exceptions import RedisError
from rich import box
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn
from rich.table import Table
from rich.text import Text

from config.repos import Whitelist
from config.settings import Settings
from worker.repos.mirrors import Mirrors, RepoStatus, SyncResult
from worker.repos.refresh import record_refresh

NOT_SYNCED = "not synced — run codebot repos sync"
NO_EMBEDDED_REDIS = "the embedded Redis is not running; a worker or `codebot ask` starts it"
NOT_RECORDED = (
    "not recorded in the history ({why}): the console and the other machines do not know of these syncs"
)


def run_sync(
    settings: Settings,
    whitelist: Whitelist,
    names: list[str],
    console: Console,
    redis: Redis | None = None,
    not_recorded: str = "",
) -> int:
    """Clone what is missing and fetch the rest, with a progress bar per repo; each sync is
    recorded in `redis`. `not_recorded`: why there is no Redis to record in (said once)."""
    unknown = [name for name in names if whitelist.get(name) is None]
    if unknown:
        known = ", ".join(whitelist.names()) or f"none (the whitelist {whitelist.path} is empty)"
        console.print(f"unknown repo {unknown[0]!r} — known repos: {known}", markup=False, highlight=False)
        return 2
    targets = list(dict.fromkeys(names)) or whitelist.names()
    if not targets:
        console.print(f"no repos are whitelisted in {whitelist.path}; nothing to sync", markup=False)
        return 0
    mirrors = Mirrors(settings, whitelist)
    columns = (
        TextColumn("{task.fields[repo]}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.description}"),
    )
    # transient: the bars give way to one summary line per repo when all are done.
    with Progress(*columns, console=console, transient=True) as bars:
        tasks = {name: bars.add_task("queued", total=1.0, repo=name) for name in targets}

        def sync_one(name: str) -> SyncResult:
            def report(message: str, fraction: float | None) -> None:
                if fraction is None:
                    bars.update(tasks[name], description=message)
                else:
                    bars.update(tasks[name], description=message, completed=fraction)

            return mirrors.sync(name, report)

        with ThreadPoolExecutor(max_workers=min(settings.sync_max_parallel_repos, len(targets))) as pool:
            results = list(pool.map(sync_one, targets))
    width = max(len(name) for name in targets)
    for result in results:
        console.print(sync_summary(result, width))
    problem = record_syncs(redis, mirrors, results) if redis is not None else not_recorded
    if problem:
        console.print(NOT_RECORDED.format(why=problem), markup=False, highlight=False)
    return 0 if all(result.ok for result in results) else 1


def record_syncs(redis: Redis, mirrors: Mirrors, results: list[SyncResult]) -> str:
    """Record each sync as an admin refresh is; "" when all were, else why not."""
    host = socket.gethostname()
    for result in results:
        try:
            record_refresh(redis, mirrors, result, host, "cli")
        except RedisError as exc:
            return f"Redis: {type(exc).__name__}"
    return ""


def sync_summary(result: SyncResult, width: int = 0) -> Text:
    """`rq  ✓ a1b2c3d (new)` or `rq  ✗ fetch failed: … (still serving 1a2b3c4)`."""
    line = Text(f"{result.name:<{width}}  ")
    waited = ", waited for another refresh" if result.waited else ""
    if result.ok:
        line.append("✓ ", style="green")
        line.append(f"{(result.sha or '')[:7]} ({'new' if result.changed else 'unchanged'}{waited})")
    else:
        line.append("✗ ", style="red")
        serving = f"still serving {result.sha[:7]}" if result.sha else "nothing to serve yet"
        line.append(f"{result.error} ({serving}{waited})")
    return line


def run_list(settings: Settings, whitelist: Whitelist, console: Console) -> int:
    """A table of the whitelist: name, branch, commit, age of the snapshot, size, status."""
    rows = Mirrors(settings, whitelist).status()
    if not rows:
        console.print(f"no repos are whitelisted in {whitelist.path}", markup=False)
        return 0
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for header in ("repo", "branch", "commit", "age", "size", "status"):
        table.add_column(header, overflow="fold")
    now = time.time()
    for row in rows:
        table.add_row(
            row.name,
            row.branch or "(default)",
            row.sha[:7] if row.sha else "—",
            time_ago(now - row.created_at) if row.created_at is not None else "—",
            human_size(row.size_bytes) if row.size_bytes is not None else "—",
            _status_text(row),
        )
    console.print(table)
    return 0


def _status_text(row: RepoStatus) -> Text:
    if row.sha is None:
        failed = f" (last attempt failed: {row.last_error})" if row.last_error else ""
        return Text(NOT_SYNCED + failed, style="yellow")
    if row.last_error:
        return Text(f"✗ {row.last_error} (serving this snapshot)", style="red")
    return Text("✓ ok", style="green")


def time_ago(seconds: float) -> str:
    """just now, 3 min ago, 5 h ago, 2 days ago."""
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if unit == 'day' and count > 1 else ''} ago"
    return "just now"


def human_size(size: int) -> str:
    """1 B, 12.3 KB, 4.5 MB (powers of 1024, as du -h)."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"
