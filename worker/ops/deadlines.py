"""Deadlines of one process, fired by one thread: `DEADLINES.add(seconds, fire)`, `DEADLINES.cancel(handle)`.

A thread per deadline (threading.Timer) costs a thread start and a cancel for something that
almost never fires; a thread polling a table fires late and wakes for nothing. Here the
deadlines sit in a heap under a lock, and one daemon thread sleeps until the earliest:

- it starts on the first `add`, and again in a forked child, which starts with an empty heap
  (the parent's deadlines are the parent's) and a fresh lock (the parent's may have been held);
- an `add` wakes it only when the new deadline is sooner than the one it sleeps until;
- a cancelled entry stays in the heap until it comes up (cancelling is O(1)); when cancelled
  entries are most of the heap it is rebuilt, so thousands of cancels do not make it grow;
- callbacks run outside the lock, one after another; one that raises is logged, and the
  thread goes on;
- `cancel` returns only once nothing can fire any more: if the callback is running, it waits
  for its end (not from within a callback). What a callback acts on (a thread, a socket, a
  process id) may be reused after `cancel` without a late firing hitting the new one.

Users: RQ job timeouts (worker/jobs/job_timeouts.py), a model attempt's time bound
(worker/agent/wire.py), a git command's timeout (worker/repos/git_read.py).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable

log = logging.getLogger(__name__)

THREAD_NAME = "codebot-deadlines"

_PENDING, _FIRING, _DONE, _CANCELLED = range(4)


class Deadline:
    """A handle on one added deadline: give it to `Deadlines.cancel`."""

    __slots__ = ("fire", "generation", "state", "when")

    def __init__(self, when: float, fire: Callable[[], object], generation: int) -> None:
        self.when = when
        self.fire = fire
        self.generation = generation  # which heap it is in: a forked child's is a new one
        self.state = _PENDING


class Deadlines:
    """The deadlines of one process and the one thread that fires them (see the module docstring)."""

    COMPACT_AT = 64  # cancelled entries are swept out once there are this many, and more than live ones

    def __init__(self, thread_name: str = THREAD_NAME) -> None:
        self._thread_name = thread_name
        self._order = itertools.count()  # ties in time fire in the order they were added
        self._generation = 0
        self._reset()
        _ALL.add(self)

    def _reset(self) -> None:
        """A fresh start: at creation, and in a forked child (the parent's thread is not there)."""
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a sooner deadline: the thread wakes
        self._fired = threading.Condition(self._lock)  # a callback ended: a waiting cancel returns
        self._heap: list[tuple[float, int, Deadline]] = []
        self._cancelled = 0  # entries of the heap that are cancelled
        self._thread: threading.Thread | None = None
        self._generation += 1

    def add(self, seconds: float, fire: Callable[[], object]) -> Deadline:
        """Call `fire()` (on the deadline thread) `seconds` from now, unless cancelled before."""
        return self.add_at(time.monotonic() + seconds, fire)

    def add_at(self, when: float, fire: Callable[[], object]) -> Deadline:
        """Call `fire()` at `when` (time.monotonic()'s clock), unless cancelled before."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
                self._thread.start()
            deadline = Deadline(when, fire, self._generation)
            heapq.heappush(self._heap, (when, next(self._order), deadline))
            if self._heap[0][2] is deadline:
                self._changed.notify()  # sooner than what the thread sleeps until
            return deadline

    def cancel(self, deadline: Deadline) -> bool:
        """Make sure `deadline` does not fire: True when it had not, False when it has fired
        (this waits for a callback still running, unless called from one)."""
        with self._lock:
            if deadline.generation != self._generation:
                deadline.state = _CANCELLED  # added before a fork: the parent's, never fired here
                return True
            if deadline.state == _PENDING:
                deadline.state = _CANCELLED
                self._cancelled += 1
                if self._cancelled >= self.COMPACT_AT and self._cancelled * 2 > len(self._heap):
                    self._compact()
                return True
            if deadline.state == _CANCELLED:
                return True
            while deadline.state == _FIRING and threading.current_thread() is not self._thread:
                self._fired.wait()
            return False

    def pending(self) -> int:
        """How many entries the heap holds, cancelled ones not yet swept out included."""
        with self._lock:
            return len(self._heap)

    def _compact(self) -> None:
        self._heap = [entry for entry in self._heap if entry[2].state == _PENDING]
        heapq.heapify(self._heap)
        self._cancelled = 0

    def _run(self) -> None:
        while True:
            due = self._wait_for_due()
            for deadline in due:
                try:
                    deadline.fire()
                except BaseException:  # the thread must outlive any callback: cancels wait on it
                    log.exception("a deadline's callback failed (%s)", self._thread_name)
                with self._lock:  # a cancel waiting on this one returns now, not after the others
                    deadline.state = _DONE
                    self._fired.notify_all()

    def _wait_for_due(self) -> list[Deadline]:
        """Sleep until at least one deadline is due; take every due one out, marked firing."""
        with self._lock:
            while True:
                while self._heap and self._heap[0][2].state == _CANCELLED:
                    heapq.heappop(self._heap)
                    self._cancelled -= 1
                if not self._heap:
                    self._changed.wait()
                    continue
                now = time.monotonic()
                if self._heap[0][0] > now:
                    self._changed.wait(self._heap[0][0] - now)
                    continue
                due = []
                while self._heap and self._heap[0][0] <= now:
                    deadline = heapq.heappop(self._heap)[2]
                    if deadline.state == _CANCELLED:
                        self._cancelled -= 1
                    else:
                        deadline.state = _FIRING
                        due.append(deadline)
                if due:
                    return due


_ALL: weakref.WeakSet[Deadlines] = weakref.WeakSet()


def _reset_all_in_child() -> None:
    for deadlines in list(_ALL):
        deadlines._reset()


os.register_at_fork(after_in_child=_reset_all_in_child)

DEADLINES = Deadlines()  # the process's one: every user shares its thread
