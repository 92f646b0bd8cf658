"""A Redis stall for tests: the embedded server SIGSTOPped (alive, connections accepted, nothing
answered), then SIGCONTed, as a long fsync, a swapped-out or a paused server would behave.

    with stalled(settings, STALL_PAST_ONE_TIMEOUT):   # SIGCONT after that many seconds
        ...                                           # whatever runs now meets the stall

`STALL_PAST_ONE_TIMEOUT` outlasts the client's read timeout, so redis-py's one retry of the
command (on a new connection) is what Redis answers once it resumes, and Redis then runs both.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

from config.settings import Settings
from worker.ops.redis_connection import SOCKET_TIMEOUT_SECONDS, server_pid

# Past the first try's timeout, well before the retry's (which starts at SOCKET_TIMEOUT_SECONDS).
STALL_PAST_ONE_TIMEOUT = SOCKET_TIMEOUT_SECONDS + 3.5


def stall(settings: Settings, seconds: float) -> threading.Timer:
    """SIGSTOP the embedded server now and SIGCONT it after `seconds` (the timer, already started)."""
    pid = server_pid(settings)
    assert pid, "no embedded Redis running"
    os.kill(pid, signal.SIGSTOP)
    timer = threading.Timer(seconds, _resume, args=(pid,))
    timer.daemon = True
    timer.start()
    return timer


@contextlib.contextmanager
def stalled(settings: Settings, seconds: float) -> Iterator[threading.Timer]:
    """`stall` for the block's duration at most: the server runs again when the block ends."""
    pid = server_pid(settings)
    timer = stall(settings, seconds)
    try:
        yield timer
    finally:
        timer.cancel()
        if pid:
            _resume(pid)


def _resume(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)
