"""The outbox in tests: the housekeeper's delivery pass (worker.jobs.outbox.deliver_due), run
in the test's process until a question's final message is delivered or given up."""

from __future__ import annotations

import time

from redis import Redis

from worker.jobs.outbox import Delivery, deliver_due
from worker.jobs.runtime import Runtime

# Delivery settings for rigs: a refused message is tried again within a fraction of a second.
FAST_DELIVERY = {"delivery_retry_initial_seconds": 0.05, "delivery_retry_max_seconds": 0.2}


def deliver_until_settled(
    redis: Redis, runtime: Runtime, question_id: str, timeout: float = 20.0
) -> Delivery:
    """Delivery passes until `question_id` is delivered or given up; what came of it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = deliver_due(redis, runtime).get(question_id)
        if result in ("delivered", "undeliverable"):
            return result
        time.sleep(0.05)
    raise AssertionError(f"{question_id} neither delivered nor given up after {timeout} s")
