"""The tool calls of one model turn, run at the same time, their results kept in the model's order.

A model that asks for a read, a search and a listing in one turn waits for the slowest of them,
not for their sum: each call runs in a thread of a process-wide pool (bounded: beyond
`TOOL_THREADS` calls at once, calls wait their turn in order), and its result is taken back on
the question's thread in the order the model made the calls. What does not change:

- every call keeps its own bounds: the question's deadline (a search stops at it) and the
  per-turn cap, decided in the model's order before any call starts; its result is redacted
  and made inert by the tool layer as before;
- a call that fails is reported as failed (its error is its result); the others run on;
- events come from the question's thread, in the model's order: `tool_started` for every call
  once they are all on their way, then `tool_finished` for each as its result is taken back;
- an identical call repeated in the same turn runs after the first and gets the first's
  result (the tools' per-question result cache), as it did when calls ran one by one;
- calls that wait on a subprocess (`search` on ripgrep, the history tools on git) are started
  first (`start_order`): a call that works in Python (a read, a listing) holds the interpreter
  for milliseconds, and a search queued behind it would start ripgrep only then (the pool's
  next thread, woken for it, waits for the interpreter meanwhile);
- whatever a tool logs carries the question's log context (each call runs in a copy of it);
- `rq`'s stop-job and the job timeout are raised in the question's thread: it waits for the
  calls in short slices so that they land there within `WAIT_SLICE_SECONDS`. Calls still
  running then end at their own deadline; their results are dropped;
- no call is waited for past the question's deadline (plus `STUCK_GRACE_SECONDS`, for a tool
  that stops itself at the deadline to say so): one still running then is stuck where no code
  can end it (a read blocked in the kernel on a hung mount), so it is given up (`ToolStuck`)
  and its thread is replaced (worker/agent/tool_pool.py); an identical call waiting on it is
  given up too, never run after it.

Shared per-question state the tools write (ToolContext's shown lines, history and caches)
takes concurrent writers: each write is one dict or set operation, atomic under the GIL, and
two calls caching the same file store the same lines.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import functools
import os
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from worker.agent.tool_pool import ToolPool, ToolStuck

T = TypeVar("T")

TOOL_THREADS = 32  # tool calls running at once in one process, over all its questions
SPARE_THREADS = 32  # stuck threads replaced before they cost capacity (worker/agent/tool_pool.py)
WAIT_SLICE_SECONDS = 0.25  # a stop request raised in the question's thread lands within this
STUCK_GRACE_SECONDS = 2.0  # past the deadline, a call still running is given up as stuck

_pool: ToolPool | None = None
_pool_pid = 0
_pool_lock = threading.Lock()
_listeners: list[Callable[[ToolPool], object]] = []


def tool_pool() -> ToolPool:
    """The process's pool (made on first use, again in a forked child: threads do not survive
    a fork). Its threads start only as calls need them."""
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ToolPool(TOOL_THREADS, SPARE_THREADS)
            _pool_pid = os.getpid()
            for listener in _listeners:
                listener(_pool)
        return _pool


def when_pool_made(listener: Callable[[ToolPool], object]) -> None:
    """Call `listener(pool)` for the process's pool as it is made (e.g. to watch its stuck
    threads), and at once for one already made."""
    with _pool_lock:
        _listeners.append(listener)
        made = _pool if _pool is not None and _pool_pid == os.getpid() else None
    if made is not None:
        listener(made)


SUBPROCESS_TOOLS = frozenset({"search", "log", "blame", "show", "diff"})  # they wait on rg or git


def start_order(names: list[str]) -> list[int]:
    """The indexes of a turn's calls in the order to start them: the subprocess-bound ones
    first, each group in the model's order (so an identical call still starts after the first)."""
    return sorted(range(len(names)), key=lambda index: names[index] not in SUBPROCESS_TOOLS)


class ToolRound(Generic[T]):
    """Starts a turn's calls in order (`start`) and hands back their results in that order
    (`result`). A call whose key matches an earlier call's in this round runs after it."""

    def __init__(self, deadline: float | None = None) -> None:
        """`deadline`: time.monotonic() by which every call must have ended (None: no bound)."""
        self._pool = tool_pool()
        self._futures: list[concurrent.futures.Future[T]] = []
        self._first: dict[str, concurrent.futures.Future[T]] = {}
        self._give_up_at = None if deadline is None else deadline + STUCK_GRACE_SECONDS

    def start(self, key: str, call: Callable[[], T]) -> int:
        """Submit `call`; returns its slot for `result`."""
        earlier = self._first.get(key)
        work = call if earlier is None else _after(earlier, call)
        # FIFO pool: an earlier call starts no later than this one, so waiting on it cannot deadlock
        future: concurrent.futures.Future[T] = self._pool.submit(
            functools.partial(contextvars.copy_context().run, work)
        )
        self._first.setdefault(key, future)
        self._futures.append(future)
        return len(self._futures) - 1

    def result(self, slot: int) -> T:
        """The call's result (or its exception, raised here), waiting in slices (see above);
        ToolStuck when it had not ended by the deadline."""
        future = self._futures[slot]
        while True:
            slice_ = WAIT_SLICE_SECONDS
            if self._give_up_at is not None:
                slice_ = max(0.0, min(slice_, self._give_up_at - time.monotonic()))
            done, _ = concurrent.futures.wait([future], timeout=slice_)
            if done:
                return future.result()
            if self._give_up_at is not None and time.monotonic() >= self._give_up_at:
                given_up = self._pool.abandon(future)
                if given_up == "finished":
                    return future.result()
                raise ToolStuck(started=given_up == "running")


def _after(earlier: concurrent.futures.Future[T], call: Callable[[], T]) -> Callable[[], T]:
    def run() -> T:
        concurrent.futures.wait([earlier])  # its outcome is its own; this call runs either way
        if earlier.cancelled() or isinstance(earlier.exception(), ToolStuck):
            raise ToolStuck(started=False)  # the same call would hang the same way
        return call()

    return run
