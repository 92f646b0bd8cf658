"""A question's lane: the platform's "taken up" round trips, off the model's path.

Marking a question taken up costs round trips to the platform (Discord: 👀 and the progress
message; Slack: 👀 and the placeholder; the console: one Redis write), and so does making the
sink's live view (worker/jobs/live.py). None of it is needed to ask the model, so the job
(worker/jobs/job.py) gives both to a `Lane`, a thread of the question's own that runs them in
order, and goes on to the agent at once:

- what the agent reports meanwhile waits in a `DeferredEvents`, in order, and is passed on once
  the lane has made the live view (to `LiveEvents`) or found there is none (to the progress
  lines); from then on it goes straight through;
- every other use of the sink by the question's thread (a refresh's progress line, the final
  message, closing the view) first waits for the lane, so the asker sees what they saw before,
  in the same order: 👀 and the progress message first, the answer last, ✅ or ⚠️ after 👀.
  A sink is never used from two threads at once.

The wait is bounded (`LANE_WAIT_SECONDS`): a platform that has not answered the 👀 in that time
is logged and the question goes on without it: no progress lines (a courtesy, while the lane
still uses the sink), no live view, and the final message posted all the same (the outbox
tries again if the sink refuses it meanwhile). A step never raises: a failure is logged, and
the question is answered all the same.
"""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from worker.agent.events import AgentEvents, SafeEvents
from worker.jobs.live import LiveView

log = logging.getLogger("codebot.lane")

# How long the question's thread waits for the lane before it uses the sink all the same.
LANE_WAIT_SECONDS = 30.0

Step = Callable[[], None]


class Lane:
    """Runs steps on a thread of its own, one after another, in the order given."""

    def __init__(self, name: str, wait_seconds: float | None = None) -> None:
        self.name = name
        self.wait_seconds = LANE_WAIT_SECONDS if wait_seconds is None else wait_seconds
        self._steps: queue.SimpleQueue[tuple[Step, threading.Event] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._last: tuple[threading.Event, float] | None = None  # the last step's end, its deadline
        self._late = False  # a wait already gave up: the next ones do not wait again
        self._closed = False

    def run(self, step: Step) -> None:
        """Run `step` after those given before (with the caller's log context); returns at once.
        After `close()` nothing more runs."""
        if self._closed:
            return
        done = threading.Event()
        self._last = (done, time.monotonic() + self.wait_seconds)
        context = contextvars.copy_context()  # a question's log lines carry its ids, also here
        self._steps.put((lambda: context.run(step), done))
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
            self._thread.start()

    def wait(self) -> bool:
        """True once every step given so far is done (at once on the lane's own thread); False
        when the last one has had `wait_seconds` and is still running (logged once, and not
        waited for again)."""
        if self._last is None or threading.current_thread() is self._thread:
            return True
        done, deadline = self._last
        if done.wait(0.0 if self._late else max(0.0, deadline - time.monotonic())):
            return True
        if not self._late:
            self._late = True
            log.warning("the platform has not marked the question taken up yet; going on without it")
        return False

    def close(self) -> None:
        """No more steps: those not started yet are dropped (a lane so late that the question
        ended without it), and the thread ends."""
        if self._thread is not None and not self._closed:
            self._steps.put(None)
        self._closed = True

    def _work(self) -> None:
        while (item := self._steps.get()) is not None:
            step, done = item
            try:
                if not self._closed:
                    step()
            except Exception:  # a courtesy failed: the question is answered all the same
                log.warning("a step of the question's lane failed", exc_info=True)
            finally:
                done.set()


class DeferredEvents:
    """worker.agent.events.AgentEvents that hold what the agent reports until `attach` names
    the observer it goes to (`LiveEvents` of the sink's live view, or the progress lines), then
    pass it on in the order it came; consecutive text deltas are passed on as one. Thread-safe:
    the agent reports on the question's thread, `attach` runs on the lane's. Never raises."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: list[tuple[str, tuple[Any, ...]]] = []
        self._target: AgentEvents | None = None
        self._view: LiveView | None = None
        self._closed = False

    def attach(self, target: AgentEvents, view: LiveView | None = None) -> None:
        """From now on events go to `target`, those held first; `view` is closed by `close()`
        (at once when the question already ended: nothing more is shown)."""
        with self._lock:
            self._view = view
            if self._closed:
                if view is not None:
                    view.close()
                return
            safe = SafeEvents(target)
            for method, args in self._held:
                getattr(safe, method)(*args)
            self._held.clear()
            self._target = safe

    def close(self) -> None:
        """The question ended: nothing more is passed on, the live view (if any) is closed."""
        with self._lock:
            self._closed = True
            self._held.clear()
            view, self._view = self._view, None
        if view is not None:
            view.close()

    def _report(self, method: str, *args: Any) -> None:
        with self._lock:
            if self._closed:
                return
            if self._target is not None:
                getattr(self._target, method)(*args)
            elif method == "text" and self._held and self._held[-1][0] == "text":
                self._held[-1] = ("text", (self._held[-1][1][0] + args[0],))
            elif method == "waiting" and self._held and self._held[-1][0] == "waiting":
                self._held[-1] = ("waiting", args)  # a waiting line replaces the last one
            else:
                self._held.append((method, args))

    def thinking(self) -> None:
        self._report("thinking")

    def text(self, delta: str) -> None:
        self._report("text", delta)

    def waiting(self, line: str) -> None:
        self._report("waiting", line)

    def tool_started(self, call_id: str, name: str, arguments: dict[str, Any], description: str) -> None:
        self._report("tool_started", call_id, name, arguments, description)

    def tool_finished(self, call_id: str, ok: bool, failure: str = "") -> None:
        self._report("tool_finished", call_id, ok, failure)
