"""RQ job timeouts for a process that runs its jobs in threads: one timer thread per process.

RQ's `TimerDeathPenalty` starts a `threading.Timer` (a thread) per job and cancels it at the
job's end: a thread start and a cancel on every question's path, for a timeout that almost
never fires (codebot's own deadline ends a question long before). `SharedTimerDeathPenalty`
is the same contract, RQ's `BaseDeathPenalty`, over one thread that sleeps until the earliest
deadline of every job in flight in the process:

- at the deadline it raises the exception in the job's thread (as RQ's timer does, through
  `PyThreadState_SetAsyncExc`: it lands when that thread next runs Python);
- a deadline cancelled before it fires never fires: firing and cancelling hold the same lock;
- its message is RQ's ("Task exceeded maximum timeout value (N seconds)"), carried by a
  subclass of the exception RQ asked for, so RQ's `except` clauses and codebot's see the same
  class. (RQ's timer instead rewrites the exception class's `__init__` for the whole process.)
"""

from __future__ import annotations

import ctypes
import functools
import heapq
import itertools
import os
import threading
import time
from typing import Any

from rq.timeouts import BaseDeathPenalty, JobTimeoutException


class _Deadline:
    __slots__ = ("exception", "live", "thread_id")

    def __init__(self, thread_id: int, exception: type[BaseException]) -> None:
        self.thread_id = thread_id
        self.exception = exception
        self.live = True  # neither cancelled nor fired


class _Deadlines:
    """The deadlines of one process, in a heap, watched by one daemon thread (started on first
    use, and again in a forked child, which inherits no thread)."""

    def __init__(self) -> None:
        self._ready = threading.Condition()
        self._heap: list[tuple[float, int, _Deadline]] = []
        self._order = itertools.count()
        self._cancelled = 0  # entries of the heap no longer live
        self._pid = 0

    def add(self, seconds: float, deadline: _Deadline) -> None:
        with self._ready:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                self._heap, self._cancelled = [], 0
                threading.Thread(target=self._watch, name="codebot-job-timeouts", daemon=True).start()
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._order), deadline))
            if self._heap[0][2] is deadline:
                self._ready.notify()

    def cancel(self, deadline: _Deadline) -> None:
        with self._ready:
            if not deadline.live:  # fired already, or cancelled twice
                return
            deadline.live = False
            self._cancelled += 1
            if self._cancelled > 64 and self._cancelled * 2 > len(self._heap):  # keep the heap small
                self._heap = [item for item in self._heap if item[2].live]
                heapq.heapify(self._heap)
                self._cancelled = 0

    def _watch(self) -> None:
        with self._ready:
            while True:
                while self._heap and not self._heap[0][2].live:
                    heapq.heappop(self._heap)
                    self._cancelled -= 1
                if not self._heap:
                    self._ready.wait()
                    continue
                left = self._heap[0][0] - time.monotonic()
                if left > 0:
                    self._ready.wait(left)
                    continue
                deadline = heapq.heappop(self._heap)[2]
                deadline.live = False
                raise_in_thread(deadline.thread_id, deadline.exception)


def raise_in_thread(thread_id: int, exception: type[BaseException]) -> bool:
    """Ask the interpreter to raise `exception` in that thread when it next runs Python (a
    job's timeout here, stop-job in worker/jobs/threaded_worker.py)."""
    done = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exception))
    if done > 1:  # never expected: undo rather than hit several threads
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)
    return done == 1


_DEADLINES = _Deadlines()


@functools.lru_cache(maxsize=64)
def _with_message(exception: type[BaseException], seconds: int | float) -> type[BaseException]:
    """A subclass of `exception` that says what RQ's timeout says (raised in a thread, an
    exception is made from its class with no arguments)."""
    message = f"Task exceeded maximum timeout value ({seconds} seconds)"

    def __init__(self: BaseException, *args: object) -> None:
        # past `exception`'s own __init__: RQ's TimerDeathPenalty, once used anywhere in the
        # process, replaces it with one that ignores its arguments and names its own timeout
        super(exception, self).__init__(*(args or (message,)))

    return type(exception.__name__, (exception,), {"__init__": __init__, "__module__": exception.__module__})


class SharedTimerDeathPenalty(BaseDeathPenalty):
    """RQ's death penalty for a job run in a thread, over the process's one timer thread."""

    def __init__(
        self, timeout: int | float, exception: type[BaseException] = JobTimeoutException, **kwargs: Any
    ) -> None:
        super().__init__(timeout, exception, **kwargs)
        self._deadline: _Deadline | None = None

    def setup_death_penalty(self) -> None:
        if self._timeout <= 0:  # RQ's "no timeout"
            return
        self._deadline = _Deadline(threading.get_ident(), _with_message(self._exception, self._timeout))
        _DEADLINES.add(self._timeout, self._deadline)

    def cancel_death_penalty(self) -> None:
        if self._deadline is not None:
            _DEADLINES.cancel(self._deadline)
            self._deadline = None
