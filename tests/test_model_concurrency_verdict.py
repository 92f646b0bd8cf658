"""What two requests' timings prove about a server's concurrency, from fixed clocks
(worker/agent/concurrency.py). The servers behind these timings are in test_model_concurrency.py.

A loaded machine reads a reply's last bytes late: a one-slot server's next reply can then seem
to begin before the previous one ended. CI saw exactly that called "serves 2 at once".
"""

from __future__ import annotations

from worker.agent import concurrency
from worker.agent.concurrency import ONE_AT_A_TIME, UNKNOWN, Flight
from worker.agent.pacing import Timing

ENDPOINT = "http://model.test/v1"


def flight(sent: float, first: float | None, last: float | None, ended: float) -> Flight:
    """A request sent at `sent` whose deltas came from `first` to `last`, its end read at `ended`."""
    made = concurrency.sent(
        ENDPOINT, Timing(started=sent, first_delta=first, last_delta=last, finished=ended)
    )
    made.sent = sent
    return made


def test_a_reply_that_came_whole_inside_another_still_streaming_proves_two_at_once() -> None:
    concurrency.forget()
    outer = flight(sent=0.0, first=1.0, last=2.5, ended=9.5)
    inner = flight(sent=2.0, first=3.0, last=4.0, ended=4.5)
    assert concurrency.answered(ENDPOINT, inner) == UNKNOWN  # the outer had no delta after it yet
    outer.timing.last_delta = 9.0  # ... and then it had
    assert concurrency.answered(ENDPOINT, outer) == 2


def test_a_next_reply_read_before_the_previous_ones_late_last_bytes_is_not_called_parallel() -> None:
    concurrency.forget()
    # one slot: the second's bytes were all sent after the first's, but the first's reader ran
    # late (its end read after the second's first delta). Nothing is proven either way: the
    # verdict waits for a pair read in time.
    first = flight(sent=0.0, first=1.0, last=5.2, ended=5.3)
    second = flight(sent=2.0, first=5.1, last=6.0, ended=6.1)
    assert concurrency.answered(ENDPOINT, first) == UNKNOWN
    assert concurrency.answered(ENDPOINT, second) == UNKNOWN


def test_a_request_whose_first_byte_came_after_the_previous_reply_ended_shows_one_at_a_time() -> None:
    concurrency.forget()
    first = flight(sent=0.0, first=1.0, last=4.0, ended=4.2)
    second = flight(sent=1.5, first=4.3, last=5.0, ended=5.1)
    assert concurrency.answered(ENDPOINT, first) == UNKNOWN
    assert concurrency.answered(ENDPOINT, second) == ONE_AT_A_TIME
