"""`codebot web`'s Quality page over a history database of 50,000 questions across 90 days, in a
real browser (Debian's Chromium, the fixtures of tests/test_web_console.py): every day of the
14-day plot, the range and the row count match counts the test makes itself in raw SQL, and
refusals and endpoint failures are never counted as gaps in the code. Skipped without chromium-driver."""

from __future__ import annotations

import json
import random
import re
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.web.app import build_app
from tests.support.console_rig import ADMIN_TOKEN, serving
from tests.support.e2e import Rig
from tests.test_web_console import CHROMEDRIVER, click_through, shot, shots
from worker.history import schema
from worker.history.store import history_url, open_engine, upgrade

__all__ = ["shots"]  # a fixture
webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402

QUESTIONS, SPAN_DAYS, DAY = 50_000, 90, 86400
NOW = 20_787 * 86400 + 13 * 3600.0  # a fixed clock: 13:00 UTC on 2026-11-30
QUIET_DAY = 3  # days before today on which nothing was asked: the plot must still show it, as 0
STATUSES = ["answered"] * 6 + ["not_an_answer", "failed", "budget_spent", "cut_off", "no_snapshot"]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not shutil.which("chromedriver", path="/usr/bin"), reason="chromium-driver not installed"
    ),
    pytest.mark.rig(web_admin_token=ADMIN_TOKEN),
]


def question_rows(count: int) -> Iterator[dict[str, object]]:
    chance = random.Random(36)
    for n in range(count):
        at = NOW - chance.random() * SPAN_DAYS * DAY
        if int(NOW // DAY) - int(at // DAY) == QUIET_DAY:
            at -= 30 * DAY  # moved out of the 14 days: the quiet day stays empty
        status = chance.choice(STATUSES)
        facts = {"failure_kind": "tools_unseen"} if status == "not_an_answer" and n % 2 else {}
        yield {"event_id": f"{n:032x}", "at": at, "question_id": f"slack:T1:C1:{n}", "ref": f"{n:08x}",
               "asked_at": at - 1, "platform": "slack", "channel": "C1", "thread": "", "asker": "U1",
               "repos": json.dumps(["payments"]), "follow_up": False, "status": status, "reason": None,
               "seconds": float(n % 60), "hops": 1, "tool_calls": 1, "prompt_tokens": 10,
               "completion_tokens": 5, "question": "", "facts": json.dumps(facts)}  # fmt: skip


@pytest.fixture
def quality_page(rig: Rig, tmp_path: Path) -> Iterator[tuple[object, Path]]:
    url = history_url(rig.settings)
    engine = open_engine(url)
    upgrade(engine)
    with engine.begin() as connection:
        connection.execute(schema.questions.insert(), list(question_rows(QUESTIONS)))
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium'}")
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    try:
        with serving(build_app(rig.runtime, rig.redis, clock=lambda: NOW, history=engine)) as base:
            driver.get(base + "/quality")
            driver.find_element(By.ID, "token").send_keys(ADMIN_TOKEN)
            click_through(driver, By.ID, "login")
            driver.get(base + "/quality")
            yield driver, Path(url.removeprefix("sqlite:///"))
    finally:
        driver.quit()


def raw_counts(database: Path, where: str = "1") -> dict[str, int]:
    """Questions per UTC day in the page's 14 days, counted here in plain SQL."""
    since = NOW - NOW % DAY - 13 * DAY
    with sqlite3.connect(database) as connection:
        rows = connection.execute(
            f"SELECT date(at, 'unixepoch'), count(*) FROM questions WHERE at >= ? AND ({where}) GROUP BY 1",
            (since,),
        )
        return dict(rows.fetchall())


def test_every_day_of_the_plot_matches_a_count_in_sql_and_the_page_states_range_and_rows(
    quality_page: tuple,
) -> None:
    driver, database = quality_page
    tips = [
        t.get_attribute("textContent") for t in driver.find_elements(By.CSS_SELECTOR, "#plot-questions title")
    ]
    plotted = {
        m[1]: int(m[2].replace(",", ""))
        for m in (re.fullmatch(r"questions (\S+): ([\d,]+)", t) for t in tips)
        if m
    }
    expected = raw_counts(database)
    assert len(plotted) == 14 and len(expected) == 13  # the quiet day: plotted, with nothing to count
    assert plotted == {day: expected.get(day, 0) for day in plotted}
    assert plotted[time.strftime("%Y-%m-%d", time.gmtime(NOW - QUIET_DAY * DAY))] == 0
    stated = driver.find_element(By.ID, "quality-range").text
    assert stated.startswith(
        f"{min(plotted)} – {max(plotted)} UTC (14 days): {sum(expected.values()):,} questions"
    )


def test_refusals_and_endpoint_failures_are_counted_as_our_failures_not_as_gaps_in_the_code(
    quality_page: tuple, shots: Path
) -> None:
    driver, database = quality_page
    cells = driver.find_elements(By.CSS_SELECTOR, "#totals tbody td")
    answered, no_answer, failed = (int(c.text.split(" ")[0].replace(",", "")) for c in cells[1:4])
    gaps = sum(raw_counts(database, "status = 'not_an_answer' AND facts NOT LIKE '%tools_unseen%'").values())
    ours = sum(
        raw_counts(
            database, "status NOT IN ('answered', 'not_an_answer') OR facts LIKE '%tools_unseen%'"
        ).values()
    )
    assert (answered, no_answer, failed) == (
        sum(raw_counts(database, "status = 'answered'").values()),
        gaps,
        ours,
    )
    assert "budget" in cells[3].text and "endpoint" in cells[3].text
    assert "codebot_question_seconds" in driver.find_element(By.ID, "definitions").text
    driver.set_window_size(1280, 2000)
    shot(driver, shots, "quality-history")
