"""Cleanups that run after a refresh returns: deleting an old snapshot's files and the blobs
it alone used costs O(its files) (2–3 s at 11k files) and nobody waits for it.

A snapshot is removed in two steps. Under the repo's refresh lock and its exclusive lease, it
is renamed to `.trash-<sha>-<pid>` (O(1): no reader holds it, none can lease it again); the
files go later, here, in one daemon thread per process, one cleanup at a time. A process
that exits before its thread is done leaves the trash to the next refresh's cleanup (never a
reader's problem: nothing reads trash). `run_now` is the synchronous choice (`codebot repos
sync`, tests): the caller waits, as before.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

Cleanup = Callable[[], None]


def run_now(work: Cleanup) -> None:
    work()


class BackgroundCleaner:
    """Runs cleanups one after another in a daemon thread of this process (started lazily, and
    again in a forked child, which inherits no threads)."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Cleanup] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def __call__(self, work: Cleanup) -> None:
        with self._lock:
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                self._queue = queue.Queue()  # a forked child's copy may hold the parent's items
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="codebot-cleanup", daemon=True)
                self._thread.start()
            self._queue.put(work)

    def _run(self) -> None:
        jobs = self._queue
        while True:
            work = jobs.get()
            try:
                work()
            except Exception:  # a cleanup that failed is retried by the next refresh's
                log.exception("background cleanup failed")
            finally:
                jobs.task_done()

    def wait(self) -> None:
        """Until every cleanup queued so far is done (tests, and a clean exit)."""
        self._queue.join()
