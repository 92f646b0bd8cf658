"""The process's one deadline thread (worker/ops/deadlines.py): order, cancels, wake-ups, faults, forks.

Each test has its own `Deadlines` (its own thread), and waits on events with generous
timeouts: what is asserted is which callbacks ran and in what order, never how long it took."""

from __future__ import annotations

import logging
import os
import threading
import time

import pytest

from worker.ops.deadlines import Deadlines

WAIT = 30.0  # seconds an event may take on a busy machine; a pass never waits this long


def test_deadlines_fire_in_the_order_of_their_times_not_the_order_they_were_added() -> None:
    deadlines = Deadlines("test-deadlines")
    fired: list[str] = []
    last = threading.Event()
    now = time.monotonic()
    deadlines.add_at(now + 0.3, lambda: (fired.append("third"), last.set()))
    deadlines.add_at(now + 0.1, lambda: fired.append("first"))
    deadlines.add_at(now + 0.2, lambda: fired.append("second"))
    deadlines.add_at(now + 0.2, lambda: fired.append("second, added later"))
    assert last.wait(WAIT)
    assert fired == ["first", "second", "second, added later", "third"]


def test_a_cancelled_deadline_never_fires_and_a_fired_one_can_no_longer_be_cancelled() -> None:
    deadlines = Deadlines("test-deadlines")
    fired: list[str] = []
    later = threading.Event()
    now = time.monotonic()
    cancelled = deadlines.add_at(now + 0.05, lambda: fired.append("cancelled"))
    deadlines.add_at(now + 0.1, lambda: (fired.append("later"), later.set()))
    assert deadlines.cancel(cancelled) is True
    assert deadlines.cancel(cancelled) is True  # twice is harmless
    assert later.wait(WAIT)
    assert fired == ["later"]  # its time passed before the later one's: it would have come first
    done = threading.Event()
    fired_one = deadlines.add(0, done.set)
    assert done.wait(WAIT)
    assert deadlines.cancel(fired_one) is False


def test_a_sooner_deadline_added_while_the_thread_sleeps_on_a_later_one_fires_first() -> None:
    deadlines = Deadlines("test-deadlines")
    fired: list[str] = []
    started = threading.Event()
    deadlines.add(0, started.set)
    assert started.wait(WAIT)  # the thread runs; next it sleeps on the hour-long one below
    deadlines.add(3600, lambda: fired.append("in an hour"))
    sooner = threading.Event()
    deadlines.add(0.05, lambda: (fired.append("sooner"), sooner.set()))
    assert sooner.wait(WAIT)  # woken for it: not left asleep for the hour
    assert fired == ["sooner"]
    assert deadlines.pending() == 1


def test_a_callback_that_raises_is_logged_and_the_deadlines_after_it_still_fire(
    caplog: pytest.LogCaptureFixture,
) -> None:
    deadlines = Deadlines("test-deadlines")
    fired: list[str] = []
    last = threading.Event()

    def broken() -> None:
        raise RuntimeError("the socket was already gone")

    now = time.monotonic()
    deadlines.add_at(now + 0.05, broken)
    deadlines.add_at(now + 0.05, lambda: fired.append("same time"))
    deadlines.add_at(now + 0.1, broken)
    deadlines.add_at(now + 0.2, lambda: (fired.append("later"), last.set()))
    with caplog.at_level(logging.ERROR, logger="worker.ops.deadlines"):
        assert last.wait(WAIT)
    assert fired == ["same time", "later"]
    failures = [record for record in caplog.records if "callback failed" in record.getMessage()]
    assert len(failures) == 2
    assert all(record.exc_info and "already gone" in str(record.exc_info[1]) for record in failures)


def test_a_forked_child_fires_its_own_deadlines_and_never_the_parents() -> None:
    deadlines = Deadlines("test-deadlines")
    parent = os.getpid()
    read, write = os.pipe()
    parents_fired = threading.Event()
    parents = deadlines.add(
        0.3, lambda: (os.write(write, b"P" if os.getpid() == parent else b"X"), parents_fired.set())
    )
    child = os.fork()
    if child == 0:
        try:  # the child's own, and one after the parent's time: the parent's would come between
            end = threading.Event()
            deadlines.add(0.01, lambda: os.write(write, b"C"))
            deadlines.add_at(parents.when + 0.1, lambda: (os.write(write, b"E"), end.set()))
            os._exit(0 if end.wait(WAIT) else 1)
        finally:
            os._exit(2)
    assert os.waitpid(child, 0)[1] == 0
    assert parents_fired.wait(WAIT)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        assert sorted(pipe.read()) == sorted(b"CEP")  # never X: the parent's one fired only in the parent


def test_cancelled_deadlines_are_swept_out_so_thousands_of_them_do_not_grow_the_heap() -> None:
    deadlines = Deadlines("test-deadlines")
    kept = [deadlines.add(3600, lambda: None) for _ in range(10)]
    for _ in range(5000):  # a model call or a git command that ends long before its deadline
        deadlines.cancel(deadlines.add(3600, lambda: None))
    assert 10 <= deadlines.pending() <= 10 + Deadlines.COMPACT_AT
    for deadline in kept:
        deadlines.cancel(deadline)
    many = [deadlines.add(3600, lambda: None) for _ in range(5000)]
    for deadline in many:
        deadlines.cancel(deadline)
    assert deadlines.pending() <= Deadlines.COMPACT_AT


def test_cancel_returns_only_after_a_callback_already_running_has_ended() -> None:
    deadlines = Deadlines("test-deadlines")
    running, release = threading.Event(), threading.Event()
    ended: list[str] = []
    deadline = deadlines.add(0, lambda: (running.set(), release.wait(WAIT), ended.append("callback")))
    assert running.wait(WAIT)
    seen_at_cancel: list[tuple[bool, list[str]]] = []

    def cancel() -> None:
        cancelled = deadlines.cancel(deadline)
        seen_at_cancel.append((cancelled, list(ended)))

    canceller = threading.Thread(target=cancel)
    canceller.start()
    canceller.join(0.05)  # give it the chance to return early, as a cancel that does not wait would
    release.set()
    canceller.join(WAIT)
    assert seen_at_cancel == [(False, ["callback"])]  # it had fired, and was over
