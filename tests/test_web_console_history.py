"""`codebot web`'s Questions page over the history database, in a real browser (Debian's
Chromium): a time range, pages, the range and row count stated, and lookup by the reference an
asker sees, for questions Redis's capped list no longer holds. Skipped without chromium-driver."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.web.app import build_app
from tests.support.console_rig import ADMIN_TOKEN, fill, serving
from tests.support.e2e import Rig
from tests.test_web_console import CHROMEDRIVER, click_through
from worker.history.recorder import Recorder
from worker.history.rows import Event
from worker.history.store import history_url, open_engine, upgrade, write_events

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402

OLDER = 120  # questions only the database holds, one an hour before the rig's 3 real ones
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not shutil.which("chromedriver", path="/usr/bin"), reason="chromium-driver not installed"
    ),
    pytest.mark.rig(web_admin_token=ADMIN_TOKEN),
]


def older_question(n: int, at: float) -> Event:
    facts = {"id": f"slack:T1:C1:{n}", "ref": f"{n:08x}", "status": "answered", "platform": "slack",
             "channel": "C1", "repos": ["payments"], "at": at, "tools": {"search": 1},
             "trace": [f"search pattern=retry{n} -> ok"]}  # fmt: skip
    return Event(f"{n:032x}", "question", at, facts)


@pytest.fixture
def browser(rig: Rig, tmp_path: Path) -> Iterator[object]:
    fill(rig)  # 3 real questions, in Redis and in the history's stream
    engine = open_engine(history_url(rig.settings))
    upgrade(engine)
    Recorder(rig.redis, engine, "test").run(threading.Event(), drain=True)
    now = time.time()
    write_events(engine, [older_question(n, now - 3600 * (n + 1)) for n in range(OLDER)])
    write_events(engine, [older_question(999, now - 20 * 86400)])  # outside the default 7 days
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium'}")
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        with serving(build_app(rig.runtime, rig.redis, history=engine)) as base:
            driver.get(base + "/questions")
            driver.find_element(By.ID, "token").send_keys(ADMIN_TOKEN)
            click_through(driver, By.ID, "login")
            yield driver
    finally:
        driver.quit()


def refs_shown(driver: object) -> list[str]:
    return [a.text for a in driver.find_elements(By.CSS_SELECTOR, "#questions a.ref")]  # type: ignore[attr-defined]


def test_the_page_states_its_range_and_count_and_pages_through_every_question_in_it(browser: object) -> None:
    driver = browser
    assert driver.find_element(By.ID, "question-count").text == "123 questions"  # type: ignore[attr-defined]
    assert "showing 1–50, page 1 of 3" in driver.find_element(By.ID, "question-range").text  # type: ignore[attr-defined]
    seen = refs_shown(driver)
    for _ in range(2):
        click_through(driver, By.ID, "older")
        seen += refs_shown(driver)
    assert "page 3 of 3" in driver.find_element(By.ID, "question-range").text  # type: ignore[attr-defined]
    assert len(seen) == len(set(seen)) == 123 and seen[-1] == f"{OLDER - 1:08x}"  # the oldest last
    assert f"{999:08x}" not in seen


def test_a_wider_range_counts_the_older_question_too(browser: object) -> None:
    driver = browser
    since = driver.find_element(By.ID, "filter-since")  # type: ignore[attr-defined]
    since.clear()
    since.send_keys("30d")
    click_through(driver, By.ID, "apply-filters")
    assert driver.find_element(By.ID, "question-count").text == "124 questions"  # type: ignore[attr-defined]


def test_a_reference_finds_a_question_redis_no_longer_holds_and_opens_its_trace(browser: object) -> None:
    driver = browser
    driver.find_element(By.ID, "filter-ref").send_keys(f"{77:08x}")  # type: ignore[attr-defined]
    click_through(driver, By.ID, "apply-filters")
    assert driver.find_element(By.ID, "question-count").text == "1 question"  # type: ignore[attr-defined]
    click_through(driver, By.LINK_TEXT, f"{77:08x}")
    assert driver.find_element(By.ID, "reference").text == f"{77:08x}"  # type: ignore[attr-defined]
    trace = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#trace li")]  # type: ignore[attr-defined]
    assert len(trace) == 1 and trace[0].startswith("search")
