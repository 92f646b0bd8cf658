"""How many requests a model endpoint serves at once: observed, never guessed.

A timed-out request on a server that keeps generating (worker/agent/pacing.py) delays a later
request only where the server serves one request at a time. Whether it does is learned from
this process's own requests to the endpoint (a threaded worker answers several questions at
once), and the verdict is kept in the endpoint memory (worker/agent/endpoint_memory.py), so
every worker knows it:

- **In parallel (N).** One streamed reply came whole (first delta to end) while another was
  coming in, and that other got a further delta after it ended; N counts the replies so
  interleaved that were coming in at one moment. A server serving one request at a time cannot
  interleave two replies, whatever order it takes its queue in. Merely overlapping is not
  enough: this process reads a reply's last bytes when its thread next runs, so on a busy
  machine a serial server's next reply can seem to begin before the previous one ended, but
  not to begin and end inside it.
- **One at a time (1).** A request sent while an earlier one was open got its first byte only
  after that one ended, and spent at least three quarters of its wait while the earlier one
  ran. A pair whose reader ran late (the first reply's end read after the next one's first
  delta) proves neither: the verdict stays unknown until a pair read in time shows it. Seen in parallel always wins over this (a busy server of several slots queues a request
  too); until either is seen, the concurrency is unknown (0). A server that does not stream
  can be seen serving one at a time, never in parallel.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass

from worker.agent.pacing import Timing

UNKNOWN = 0
ONE_AT_A_TIME = 1
RECENT_KEPT = 32  # requests remembered per endpoint, open or ended: enough to see any overlap
WAITED_SHARE = 0.75  # of a request's wait for its first byte, spent behind an earlier request


@dataclass
class Flight:
    """One request to an endpoint, as this process saw it (monotonic times)."""

    sent: float
    timing: Timing  # its first streamed delta, set as it comes (worker/agent/pacing.py)
    ended: float | None = None
    answered: bool = False

    def replying_at(self, moment: float) -> bool:
        """Its reply was coming in at `moment`: first delta before, not ended yet."""
        first = self.timing.first_delta
        return first is not None and first <= moment and (self.ended is None or self.ended > moment)


_FLIGHTS: dict[str, deque[Flight]] = {}
_LOCK = threading.Lock()


def sent(endpoint: str, timing: Timing) -> Flight:
    """A request is about to go to `endpoint` (its id in the endpoint memory)."""
    flight = Flight(sent=time.monotonic(), timing=timing)
    with _LOCK:
        _FLIGHTS.setdefault(endpoint, deque(maxlen=RECENT_KEPT)).append(flight)
    return flight


def failed(flight: Flight) -> None:
    """The request ended without an answer (an error, a timeout, a cut)."""
    with _LOCK:
        flight.ended = time.monotonic()


def answered(endpoint: str, flight: Flight) -> int:
    """The request was answered. Returns the concurrency its reply showed (N >= 2, or
    ONE_AT_A_TIME), or UNKNOWN."""
    with _LOCK:
        # when its last chunk was read, not now nor when the call returned: what ran since (the
        # stream's closing, the turn's parsing, the endpoint memory's Redis writes, a busy
        # machine's scheduling) would make a later reply seem to overlap it
        flight.ended = flight.timing.last_chunk or flight.timing.finished or time.monotonic()
        flight.answered = True
        others = [other for other in _FLIGHTS.get(endpoint, ()) if other is not flight]
        at_once = _most_replying_at_once(flight, others)
        if at_once >= 2:
            return at_once
        began = flight.timing.first_delta or flight.ended
        waited_behind = [
            other.ended
            for other in others
            if other.answered
            and other.sent < flight.sent
            and other.ended is not None
            and flight.sent < other.ended <= began
        ]
    if waited_behind and max(waited_behind) - flight.sent >= WAITED_SHARE * (began - flight.sent) > 0:
        return ONE_AT_A_TIME
    return UNKNOWN


def _interleaved(outer: Flight, inner: Flight) -> bool:
    """`inner`'s reply began and ended while `outer`'s was coming in, and `outer` got a delta
    after `inner` ended: proof both were served at once, however late a thread read its bytes."""
    outer_first, inner_first = outer.timing.first_delta, inner.timing.first_delta
    outer_last = outer.timing.last_delta
    if outer_first is None or inner_first is None or outer_last is None or inner.ended is None:
        return False
    return outer_first < inner_first and inner.ended < outer_last


def _most_replying_at_once(flight: Flight, others: list[Flight]) -> int:
    """The most replies coming in at one moment while this one's was, counting only replies
    interleaved with it (1 when none was, or it was not streamed)."""
    first = flight.timing.first_delta
    if first is None:
        return 1
    others = [other for other in others if _interleaved(flight, other) or _interleaved(other, flight)]
    if not others:
        return 1
    moments = [first] + [
        other.timing.first_delta
        for other in others
        if other.timing.first_delta is not None
        and first <= other.timing.first_delta < (flight.ended or first)
    ]
    return max(1 + sum(other.replying_at(moment) for other in others) for moment in moments)


def concurrency_text(observed: int) -> str:
    """What was observed of the endpoint's concurrency, as the log and `codebot status` say it."""
    if observed == 1:
        return (
            "serves one request at a time (observed): a timed-out request makes every worker wait "
            "until it would be done"
        )
    return f"serves {observed} requests at once (observed): a timed-out request makes no other wait"


def forget() -> None:
    """Drop every request remembered (for tests)."""
    with _LOCK:
        _FLIGHTS.clear()
