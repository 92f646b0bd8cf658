"""The process's threads for tool calls: a FIFO pool that gives up on a call stuck in the kernel.

A read on a hung network mount or a failing disk blocks in the kernel and never returns; no
Python code can end it, and a thread blocked in it is lost to its pool for as long as that
lasts. concurrent.futures' pool cannot let go of such a thread: after `size` of them, every
later call would wait forever while the process still looked healthy. This pool can:

- `submit` queues a call (first in, first started) and starts a thread if none is idle and
  fewer than the pool's capacity run; threads are daemons (a stuck one must not hold up exit);
- `abandon` is called by whoever waited for the call past its deadline: a call still queued is
  cancelled; a running one is ended at once with `ToolStuck` (its waiters wake), its thread is
  counted stuck and no longer counts against the pool's capacity, so the next call gets a
  new thread. Up to `spare` stuck threads are replaced that way; beyond that each one costs a
  thread of capacity, and with none left the pool is `exhausted` (a process whose tool calls
  can no longer run: `/health`, `codebot status` and the console say so);
- a stuck thread whose call returns after all (the mount came back) drops the result, is no
  longer counted and ends: the pool is whole again;
- listeners (`on_change`) hear of every change in the number of stuck threads, outside the lock.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

log = logging.getLogger("codebot.tools")

Abandoned = Literal["finished", "queued", "running"]


class ToolStuck(Exception):
    """A tool call that did not end by its deadline and was given up (see the module docstring)."""

    def __init__(self, started: bool) -> None:
        super().__init__("the tool call did not return in time" if started else "the tool call never started")
        self.started = started  # False: it waited for a thread that never came free


@dataclass(frozen=True)
class PoolState:
    """What an operator needs to know of a process's tool threads."""

    size: int  # calls that run at once in a healthy pool
    busy: int  # threads running a call now (stuck ones not counted)
    stuck: int  # threads in a call given up on that has not returned
    spare: int  # stuck threads replaced by new ones; more than that cost capacity

    @property
    def capacity(self) -> int:
        """Calls that can run at once now."""
        return max(0, self.size - max(0, self.stuck - self.spare))

    @property
    def exhausted(self) -> bool:
        return self.capacity == 0

    def as_dict(self) -> dict[str, int | bool]:
        return {
            "size": self.size,
            "capacity": self.capacity,
            "busy": self.busy,
            "stuck": self.stuck,
            "exhausted": self.exhausted,
        }


class _Work:
    __slots__ = ("abandoned", "call", "future")

    def __init__(self, call: Callable[[], Any]) -> None:
        self.call = call
        self.future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.abandoned = False


class ToolPool:
    """See the module docstring."""

    def __init__(self, size: int, spare: int, thread_name_prefix: str = "codebot-tool") -> None:
        self.size = size
        self.spare = spare
        self._prefix = thread_name_prefix
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._queue: collections.deque[_Work] = collections.deque()
        self._work: dict[concurrent.futures.Future[Any], _Work] = {}  # queued or running
        self._threads = 0  # healthy threads alive (idle or busy)
        self._idle = 0
        self._stuck = 0
        self._started = 0  # threads ever started, for their names
        self._listeners: list[Callable[[PoolState], object]] = []

    def on_change(self, listener: Callable[[PoolState], object]) -> None:
        """Call `listener(state)` whenever the number of stuck threads changes."""
        self._listeners.append(listener)

    def state(self) -> PoolState:
        with self._lock:
            return self._state()

    def _state(self) -> PoolState:
        busy = self._threads - self._idle
        return PoolState(self.size, busy, self._stuck, self.spare)

    def submit(self, call: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        work = _Work(call)
        with self._lock:
            self._queue.append(work)
            self._work[work.future] = work
            if self._idle:
                self._ready.notify()
            # `_idle` still counts a thread notified but not yet awake: a thread more at worst
            if len(self._queue) > self._idle and self._threads < self._state().capacity:
                self._start_thread()
        return work.future

    def abandon(self, future: concurrent.futures.Future[Any]) -> Abandoned:
        """Give up on the call of `future` (see the module docstring): what it was doing."""
        with self._lock:
            work = self._work.pop(future, None)
            if work is None or future.done():
                return "finished"
            if future.cancel():  # still queued: its thread, when it comes, skips it
                return "queued"
            work.abandoned = True
            self._stuck += 1
            self._threads -= 1  # that thread no longer counts: a new one may start
            future.set_exception(ToolStuck(started=True))
            if self._queue and self._idle == 0 and self._threads < self._state().capacity:
                self._start_thread()  # a call queued behind it gets the replacement now
            state = self._state()
        log.error("a tool call did not return by its deadline; its thread is stuck (%d stuck)", state.stuck)
        self._tell(state)
        return "running"

    def _start_thread(self) -> None:
        self._threads += 1
        self._started += 1
        name = f"{self._prefix}_{self._started}"
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        while True:
            with self._lock:
                while not self._queue:
                    self._idle += 1
                    self._ready.wait()
                    self._idle -= 1
                work = self._queue.popleft()
            if not work.future.set_running_or_notify_cancel():
                continue  # cancelled while queued
            outcome: Any = None
            failed: BaseException | None = None
            try:
                outcome = work.call()
            except BaseException as exc:  # the caller's to see, as concurrent.futures does
                failed = exc
            if self._settle(work, outcome, failed):
                return

    def _settle(self, work: _Work, outcome: Any, failed: BaseException | None) -> bool:
        """Hand the call's outcome to its future; True when this thread was given up on and ends."""
        with self._lock:
            if work.abandoned:
                self._stuck -= 1
                state = self._state()
            else:
                self._work.pop(work.future, None)
                if failed is None:
                    work.future.set_result(outcome)
                else:
                    work.future.set_exception(failed)
                return False
        log.warning("a stuck tool call returned after all; its thread ends (%d still stuck)", state.stuck)
        self._tell(state)
        return True

    def _tell(self, state: PoolState) -> None:
        for listener in list(self._listeners):
            try:
                listener(state)
            except Exception:  # a listener's failure is its own; the pool goes on
                log.exception("a tool pool listener failed")
