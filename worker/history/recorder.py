"""The recorder: moves the history's Redis stream into the database, exactly once.

One consumer group (GROUP) reads the stream. A batch is written in one transaction, keyed by
each entry's own id (INSERT … ON CONFLICT DO NOTHING), and acknowledged (XACK) only after the
commit. So:

- killed before the commit: nothing was written and nothing acknowledged; the entries stay
  pending under this consumer and are read again at its next start (its own pending entries
  first, `XREADGROUP … 0`), or claimed by another recorder once idle CLAIM_IDLE_MS (XAUTOCLAIM);
- killed between the commit and the XACK: the entries are read again, and their rows are
  already there, so writing them again does nothing.

0 missing and 0 doubled either way (tests/test_history_recorder.py kills a real one mid-run).
Every PRUNE_EVERY_SECONDS it also deletes rows older than `history_retention_days`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from redis import Redis
from redis.exceptions import ResponseError
from sqlalchemy import Engine

from worker.history.events import STREAM_KEY
from worker.history.rows import parse_entry
from worker.history.store import prune, write_events

log = logging.getLogger("codebot.history")

GROUP = "codebot-history-recorders"
BATCH = 500
BLOCK_MS = 1000
CLAIM_IDLE_MS = 60_000  # another recorder's entries are taken over after a minute unacknowledged
PRUNE_EVERY_SECONDS = 3600.0
# A step waits BLOCK_MS for entries and writes at most one batch: a loop that has not come round
# for this long is stuck (a database that stopped answering), whatever its process looks like.
STALLED_SECONDS = 120.0

Entries = list[tuple[bytes, dict[bytes, bytes]]]


@dataclass
class Recorder:
    redis: Redis
    engine: Engine
    consumer: str
    retention_days: float = 90.0
    batch: int = BATCH
    block_ms: int = BLOCK_MS
    recorded: int = 0
    _own_pending_done: bool = False
    _pruned_at: float = field(default=0.0)
    _stepped_at: float = field(default_factory=time.monotonic)  # when the loop last came round

    def ensure_group(self) -> None:
        """Create the consumer group (reading from the stream's start) unless it exists."""
        try:
            self.redis.xgroup_create(STREAM_KEY, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def step(self, block: bool = True) -> int:
        """Read, write and acknowledge one batch; the number of entries it handled."""
        entries = self._next_entries(block)
        if entries:
            self.store(entries)
            self.redis.xack(STREAM_KEY, GROUP, *[entry_id for entry_id, _ in entries])
            self.recorded += len(entries)
        return len(entries)

    def store(self, entries: Entries) -> None:
        """Write the entries' rows in one transaction (not acknowledged: `step` does that)."""
        # an entry trimmed from the stream while pending comes back without fields: acknowledged, skipped
        events = [event for _, fields in entries if fields and (event := parse_entry(fields)) is not None]  # type: ignore[arg-type]
        write_events(self.engine, events)

    def _next_entries(self, block: bool) -> Entries:
        if not self._own_pending_done:
            # what this consumer read before a crash and never acknowledged, oldest first
            own = self._read("0", block=False)
            if own:
                return own
            self._own_pending_done = True
        claimed = self.redis.xautoclaim(
            STREAM_KEY, GROUP, self.consumer, min_idle_time=CLAIM_IDLE_MS, start_id="0-0", count=self.batch
        )
        if claimed[1]:
            return list(claimed[1])
        return self._read(">", block=block)

    def _read(self, start: str, block: bool) -> Entries:
        answer = self.redis.xreadgroup(
            GROUP,
            self.consumer,
            {STREAM_KEY: start},
            count=self.batch,
            block=self.block_ms if block else None,
        )
        return list(answer[0][1]) if answer else []

    def prune_when_due(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        if now - self._pruned_at >= PRUNE_EVERY_SECONDS:
            deleted = prune(self.engine, self.retention_days, now)
            self._pruned_at = now
            if any(deleted.values()):
                log.info("history: deleted rows older than %s days: %s", self.retention_days, deleted)

    def run(
        self, stop: threading.Event, drain: bool = False, on_batch: Callable[[int], None] | None = None
    ) -> int:
        """Record until `stop` is set, or (drain) until the stream has nothing new. Returns the
        number of entries recorded."""
        self.ensure_group()
        while not stop.is_set():
            self.prune_when_due()
            handled = self.step(block=not drain)
            self._stepped_at = time.monotonic()
            if on_batch is not None and handled:
                on_batch(handled)
            if drain and handled == 0:
                break
        return self.recorded

    def unhealthy_reason(self, redis: Redis) -> str | None:
        """Why this recorder is unhealthy (its /health, worker/ops/metrics.py), or None: Redis
        unreachable (raised, and said so by /health), or a loop that stopped coming round."""
        redis.ping()
        stalled = time.monotonic() - self._stepped_at
        if stalled > STALLED_SECONDS:
            return f"unhealthy: the recorder has written nothing and waited for nothing for {stalled:.0f} s"
        return None
