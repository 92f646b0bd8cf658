"""The wait an asker over the rate limit is told: whole seconds, within the window."""

from __future__ import annotations

import time
from pathlib import Path

from config.settings import load_settings
from worker.jobs.limits import RATE_KEY_PREFIX, check_rate
from worker.ops.redis_connection import connect, stop_embedded_server


def test_the_wait_told_is_never_longer_than_the_window_even_when_a_question_was_counted_a_moment_later(
    tmp_path: Path,
) -> None:
    settings = load_settings(
        env_file=None, data_dir=tmp_path / "data", rate_limit_questions=2, rate_limit_window_seconds=60
    )
    redis = connect(settings)
    try:
        # two questions counted by other adapter threads just after this one read the clock
        later = time.time() + 0.5
        redis.zadd(RATE_KEY_PREFIX + "slack:U1", {f"{later:.6f}-a": later, f"{later:.6f}-b": later})
        assert check_rate(redis, "slack:U1", settings) == 60  # not 61
        assert check_rate(redis, "slack:U2", settings) is None  # another asker is not limited
    finally:
        stop_embedded_server(settings)
