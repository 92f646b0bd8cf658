"""Every worker machine hears at once that a repo moved: a Redis stream of recorded commits.

`record_refresh` (worker/repos/refresh.py) writes the commit every machine should serve, and after
a refresh (a push's, an admin's, a scheduled one; not a catch-up that happened to fetch a newer
commit) appends in the same transaction the repo's name to the stream `codebot:repos:moved`. Each
machine's housekeeper (worker/jobs/housekeeping.py) blocks on that stream and catches the named
repos up as soon as an entry lands, instead of at its next check (`refresh_check_seconds`):
after a push, the machine that ran the refresh and every other one serve the new commit
within a sync of each other.

A stream, not pub/sub: a housekeeper that is busy catching up, or reconnecting to a restarting
Redis, reads what was appended meanwhile from the last entry it read; a pub/sub message sent
then would be lost until the next periodic check.

Coalescing: one read returns everything appended since the last one, and each repo it names
is caught up once, to the commit recorded in Redis by then (the newest), however many entries
named it. A burst of pushes therefore costs a machine at most one sync per refresh recorded
elsewhere, and fewer when its own sync outlasts several of them.
"""

from __future__ import annotations

from typing import Any

from redis import Redis
from redis.client import Pipeline

MOVED_STREAM = "codebot:repos:moved"  # entries {repo, sha}: a commit recorded for every machine
# Entries kept (XADD MAXLEN ~, so trimming is cheap): far more than a machine falls behind by
# between two reads; one that fell further behind still has its periodic catch-up.
MOVED_STREAM_KEPT = 1000
NO_ENTRY_ID = "0-0"  # the id before any entry


def announce_moved(pipe: Pipeline, name: str, sha: str) -> None:
    """Queue on `pipe` the entry that wakes every machine's housekeeper for `name`."""
    pipe.xadd(MOVED_STREAM, {"repo": name, "sha": sha}, maxlen=MOVED_STREAM_KEPT, approximate=True)


def newest_entry_id(redis: Redis) -> str:
    """The id of the stream's newest entry: reading from it returns only what comes later."""
    newest = redis.xrevrange(MOVED_STREAM, count=1)
    return _text(newest[0][0]) if newest else NO_ENTRY_ID


def wait_for_moved(redis: Redis, after: str, block_seconds: float) -> tuple[str, list[str]]:
    """Blocks up to `block_seconds` for entries after `after`; returns the id of the last one
    read (`after` when none came) and the repos they name, each once, in the order named."""
    batches: Any = redis.xread({MOVED_STREAM: after}, block=max(1, int(block_seconds * 1000)))
    names: dict[str, None] = {}
    for _stream, entries in batches or []:
        for entry_id, fields in entries:
            after = _text(entry_id)
            name = fields.get(b"repo", fields.get("repo"))
            if name:
                names[_text(name)] = None
    return after, list(names)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
