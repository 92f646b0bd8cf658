"""HTTP mode's second process: bolt's dispatch and listeners for the Events API deliveries that
the HTTP process has already acknowledged.

Why a process and not the listener threads next to the server: a question's intake (Redis
dedupe, scope, rate limits, enqueue, the 👀 call) costs a few ms of CPU in Python. In the process
that answers HTTP, a burst's intake holds the GIL that every ack needs: with 20 deliveries at
once, the ack's p99 was 50x a bare signature-checking app's (bench/RESULTS.md, "Slack ack").
In its own process the OS shares the cores between the two, and an ack waits for no intake.

The HTTP process (bot/slack/http_server.py) checks the signature, answers 200 and puts the
delivery (its body and headers, as they came) on a bounded queue; this process dispatches each
to its own bolt App with the same wiring table (bolt checks the signature again), and its
listeners run on its listener threads. Slash commands, interactivity and `url_verification`
answer in their HTTP response, so the HTTP process dispatches those itself.

- Full queue (`slack_http_max_connections` deliveries waiting): the HTTP process dispatches the
  delivery itself and answers after, as before this process existed; nothing is lost.
- This process dies: a watchdog thread of the HTTP process starts another within a second and
  logs the death; the deliveries still queued go to the new one, those it had taken and not yet
  queued are lost (Slack does not retry an acknowledged delivery).
- Shutdown: after the HTTP server finished its requests, `None` on the queue: this process
  dispatches what is queued, lets its listeners finish, and exits. It ignores SIGTERM/SIGINT
  itself (the HTTP process says when), and exits if the HTTP process is gone.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event

from config.errors import ConfigError
from config.settings import Settings

log = logging.getLogger("codebot.slack")

Headers = dict[str, list[str]]
Delivery = tuple[str, Headers]  # the body as bolt reads it, and the request's headers
# main(settings, inbox, ready): the intake process's main function, module-level (it is spawned)
IntakeMain = Callable[[Settings, Connection, Event], None]
START_SECONDS = 120.0  # imports, the runtime, the redactor: seconds on a busy 2-core machine
STOP_SECONDS = 30.0
WATCH_SECONDS = 1.0


class IntakeProcess:
    """The intake process, the queue to it, and a watchdog that replaces it if it dies.

    The queue is this process's (a bounded queue.Queue: putting never blocks the event loop);
    a feeder thread writes each delivery to a pipe the intake process reads. Only this process
    writes and only the intake process reads, so no lock is shared with a process that may die
    holding it (multiprocessing.Queue's readers share one), and a replacement reads on where
    the dead one stopped."""

    def __init__(self, main: IntakeMain, settings: Settings, max_waiting: int) -> None:
        # spawn, not fork: the HTTP process already runs threads (a fork copies their held locks)
        self._context = multiprocessing.get_context("spawn")
        self._main = main
        self._settings = settings
        self._reader, self._writer = self._context.Pipe(duplex=False)
        self._waiting: queue.Queue[Delivery | None] = queue.Queue(max_waiting)
        self._stopping = threading.Event()
        self.process = self._start()
        self._feeder = threading.Thread(target=self._feed, name="slack-intake-feeder", daemon=True)
        self._feeder.start()
        self._watchdog = threading.Thread(target=self._watch, name="slack-intake-watchdog", daemon=True)
        self._watchdog.start()

    def _start(self) -> BaseProcess:
        ready = self._context.Event()
        process = self._context.Process(
            target=self._main, args=(self._settings, self._reader, ready), name="codebot-slack-intake"
        )
        process.start()
        deadline = time.monotonic() + START_SECONDS
        while not ready.wait(0.2):
            if not process.is_alive():
                raise ConfigError(f"slack: the intake process failed to start (exit code {process.exitcode})")
            if time.monotonic() > deadline:
                process.terminate()
                raise ConfigError(f"slack: the intake process did not start in {START_SECONDS:.0f} s")
        return process

    def put(self, body: str, headers: Headers) -> bool:
        """Hand an acknowledged delivery over; False when the queue is full (dispatch it here)."""
        try:
            self._waiting.put_nowait((body, headers))
        except queue.Full:
            return False
        return True

    def _feed(self) -> None:
        while True:
            delivery = self._waiting.get()
            self._writer.send(delivery)  # blocks while the pipe is full: the intake is behind
            if delivery is None:
                return

    def _watch(self) -> None:
        while not self._stopping.is_set():
            self.process.join(WATCH_SECONDS)
            if self._stopping.is_set() or self.process.is_alive():
                continue
            log.error(
                "slack: the intake process died (exit code %s): starting another; the events it "
                "had taken and not yet queued are lost",
                self.process.exitcode,
            )
            try:
                self.process = self._start()
            except ConfigError as exc:
                log.error("%s: trying again", exc)
                self._stopping.wait(WATCH_SECONDS)

    def stop(self) -> None:
        """Dispatch what is queued, let the listeners finish, then end the process."""
        self._stopping.set()
        self._waiting.put(None)
        self._feeder.join(STOP_SECONDS)
        self.process.join(STOP_SECONDS)
        if self.process.is_alive():
            log.error("slack: the intake process did not stop in %.0f s: terminated", STOP_SECONDS)
            self.process.terminate()
            self.process.join(5)


def serve_inbox(inbox: Connection, dispatch: Callable[[str, Headers], int]) -> None:
    """The intake process's loop: each delivery to `dispatch` (bolt) until `None` or until the
    HTTP process that started it is gone."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()
    while True:
        if not inbox.poll(WATCH_SECONDS):
            if os.getppid() != parent:
                log.error("slack: the HTTP process is gone: the intake process stops")
                return
            continue
        delivery: Delivery | None = inbox.recv()
        if delivery is None:
            return
        try:
            status = dispatch(*delivery)
        except Exception:  # bolt answers its own failures; anything else must not end this loop
            log.exception("slack: dispatching an acknowledged event failed")
            continue
        if status != 200:  # bolt refused it after all (auth.test failed…): Slack will not retry
            log.warning("slack: an acknowledged event was dropped: bolt answered %s", status)
