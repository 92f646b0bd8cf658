"""RQ job timeouts for a process that runs its jobs in threads, on the process's one deadline thread.

RQ's `TimerDeathPenalty` starts a `threading.Timer` (a thread) per job and cancels it at the
job's end: a thread start and a cancel on every question's path, for a timeout that almost
never fires (codebot's own deadline ends a question long before). `SharedTimerDeathPenalty`
is the same contract, RQ's `BaseDeathPenalty`, over the process's one deadline thread
(worker/ops/deadlines.py), which sleeps until the earliest deadline in the process:

- at the deadline it raises the exception in the job's thread (as RQ's timer does, through
  `PyThreadState_SetAsyncExc`: it lands when that thread next runs Python);
- a deadline cancelled before it fires never fires, and a cancel that meets it firing returns
  once it has fired: after the job's end nothing is raised into its thread (which may be
  running the next job);
- its message is RQ's ("Task exceeded maximum timeout value (N seconds)"), carried by a
  subclass of the exception RQ asked for, so RQ's `except` clauses and codebot's see the same
  class. (RQ's timer instead rewrites the exception class's `__init__` for the whole process.)
"""

from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any

from rq.timeouts import BaseDeathPenalty, JobTimeoutException

from worker.ops.deadlines import DEADLINES, Deadline


def raise_in_thread(thread_id: int, exception: type[BaseException]) -> bool:
    """Ask the interpreter to raise `exception` in that thread when it next runs Python (a
    job's timeout here, stop-job in worker/jobs/threaded_worker.py)."""
    done = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exception))
    if done > 1:  # never expected: undo rather than hit several threads
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)
    return done == 1


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
        self._deadline: Deadline | None = None

    def setup_death_penalty(self) -> None:
        if self._timeout <= 0:  # RQ's "no timeout"
            return
        exception = _with_message(self._exception, self._timeout)
        self._deadline = DEADLINES.add(
            self._timeout, functools.partial(raise_in_thread, threading.get_ident(), exception)
        )

    def cancel_death_penalty(self) -> None:
        if self._deadline is not None:
            DEADLINES.cancel(self._deadline)
            self._deadline = None
