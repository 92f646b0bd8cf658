"""`codebot web` in a real browser: Debian's Chromium driven by Selenium (/usr/bin/chromedriver).

Real runs of the scripted model fill a real (embedded) Redis; the operator logs in with the
token, reads the questions, clicks through to one question's trace, filters, and sees the
plots drawn. Each page's screenshot is taken (a PNG checked for size); with
CODEBOT_CONSOLE_SCREENSHOTS=docs/img they land where docs/operations.md shows them.
.ci/run installs chromium and chromium-driver; without them these tests are skipped, saying so.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.web.app import build_app
from bot.web.auth import COOKIE
from tests.support.console_rig import ADMIN_TOKEN, Filled, fill, serving
from tests.support.e2e import Rig
from worker.jobs.push_refresh import record_delivery
from worker.jobs.question import reference_id

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import WebDriverException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOTS_VARIABLE = "CODEBOT_CONSOLE_SCREENSHOTS"  # e.g. docs/img, to refresh the docs' pictures
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not shutil.which("chromedriver", path="/usr/bin"), reason="chromium-driver not installed"
    ),
    pytest.mark.rig(
        web_admin_token=ADMIN_TOKEN,
        daily_token_budget=200_000,
        model_input_usd_per_million_tokens=2.0,
        model_output_usd_per_million_tokens=8.0,
    ),
]


@pytest.fixture
def browser(rig: Rig, tmp_path: Path) -> Iterator[tuple[object, str, Filled]]:
    filled = fill(rig)
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium'}")
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        with serving(build_app(rig.runtime, rig.redis)) as base:
            driver.get(base + "/questions")
            driver.find_element(By.ID, "token").send_keys(ADMIN_TOKEN)
            click_through(driver, By.ID, "login")
            WebDriverWait(driver, 30).until(
                lambda d: d.find_elements(By.ID, "questions"), "no questions page after logging in"
            )
            yield driver, base, filled
    finally:
        driver.quit()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get(SCREENSHOTS_VARIABLE) or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def click_through(driver: object, by: str, value: str) -> None:
    """Click a link or button and wait for the next page (the old one gone, the new one loaded).

    The old page is marked in its window object, which a new page does not have. (Polling the
    old page's element for staleness made chromedriver answer "unhandled inspector error" now
    and then while the page was being replaced: a failure of the wait, not of the console.)"""
    driver.execute_script("window.codebotOldPage = true")  # type: ignore[attr-defined]
    driver.find_element(by, value).click()  # type: ignore[attr-defined]
    WebDriverWait(driver, 30, ignored_exceptions=(WebDriverException,)).until(
        lambda d: d.execute_script("return !window.codebotOldPage && document.readyState === 'complete'")
    )


def shot(driver: object, folder: Path, name: str) -> None:
    path = folder / f"console-{name}.png"
    assert driver.save_screenshot(str(path))  # type: ignore[attr-defined]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def test_an_operator_logs_in_and_clicks_from_a_question_to_its_tool_trace(
    browser: tuple, shots: Path
) -> None:
    driver, _, filled = browser
    rows = driver.find_elements(By.CSS_SELECTOR, "#questions tr.question")
    assert len(rows) == 3
    assert "how many times does retry try?" in driver.find_element(By.ID, "questions").text
    shot(driver, shots, "questions")
    click_through(driver, By.LINK_TEXT, reference_id(filled.answered.id))
    assert driver.find_element(By.ID, "reference").text == reference_id(filled.answered.id)
    trace = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#trace li")]
    assert len(trace) == 2 and trace[0].startswith("search") and trace[1].startswith("read_file")
    assert "👍" in driver.find_element(By.ID, "votes").text
    shot(driver, shots, "trace")


def test_filters_by_outcome_repo_and_channel_narrow_the_questions(browser: tuple, shots: Path) -> None:
    driver, _, filled = browser
    Select(driver.find_element(By.ID, "filter-outcome")).select_by_visible_text("failed")
    click_through(driver, By.ID, "apply-filters")
    assert driver.find_element(By.ID, "question-count").text == "1 question"
    assert reference_id(filled.failed.id) in driver.find_element(By.ID, "questions").text
    Select(driver.find_element(By.ID, "filter-outcome")).select_by_visible_text("answered")
    Select(driver.find_element(By.ID, "filter-repo")).select_by_visible_text("payments")
    Select(driver.find_element(By.ID, "filter-channel")).select_by_visible_text("console:console")
    click_through(driver, By.ID, "apply-filters")
    assert driver.find_element(By.ID, "question-count").text == "2 questions"
    assert "outcome=answered" in driver.current_url and "repo=payments" in driver.current_url


def test_quality_plots_render_with_a_point_for_today_and_hostile_reasons_stay_text(
    browser: tuple, shots: Path
) -> None:
    driver, _, _ = browser
    click_through(driver, By.ID, "nav-quality")
    for plot in ("rates", "time-to-answer"):
        svg = driver.find_element(By.CSS_SELECTOR, f"#plot-{plot} svg")
        assert svg.size["width"] > 300 and svg.size["height"] > 100
        assert driver.find_elements(By.CSS_SELECTOR, f"#plot-{plot} circle.dot")
    tips = [
        t.get_attribute("textContent") for t in driver.find_elements(By.CSS_SELECTOR, "#plot-rates title")
    ]
    assert any(tip.startswith("answer rate") and tip.endswith(": 66.67%") for tip in tips), tips
    assert any(tip.startswith("👍 helpful rate") and tip.endswith(": 50%") for tip in tips), tips
    reasons = driver.find_element(By.ID, "reasons").text
    assert '</td><script>alert("reason")</script> wrong file' in reasons
    assert driver.find_elements(By.TAG_NAME, "script") == []
    shot(driver, shots, "quality")


def test_repos_and_system_show_syncs_workers_endpoints_and_usage_against_the_budget(
    browser: tuple, shots: Path
) -> None:
    driver, _, _ = browser
    click_through(driver, By.ID, "nav-repos")
    repos = driver.find_element(By.ID, "repos").text
    assert "payments" in repos and "1,000 commits" in repos
    assert "could not read from remote" in driver.find_element(By.CSS_SELECTOR, ".syncs tr.failed").text
    shot(driver, shots, "repos")
    click_through(driver, By.ID, "nav-system")
    assert "questions waiting" in driver.find_element(By.ID, "queue").text
    assert "HTTP" in driver.find_element(By.ID, "model-errors").text
    assert driver.find_elements(By.CSS_SELECTOR, "#plot-tokens line.limit")  # the budget line
    assert driver.find_elements(By.CSS_SELECTOR, "#plot-cost circle.dot")
    shot(driver, shots, "system")


def test_system_shows_each_forges_last_delivery_and_its_verdict_as_text(browser: tuple, rig: Rig) -> None:
    driver, _, _ = browser
    hostile = "<img src=x onerror=\"document.title='owned'\">"  # a delivery id is the sender's text
    record_delivery(rig.redis, "github", "refresh queued", 202, hostile, "payments")
    record_delivery(rig.redis, "gitlab", "refused: bad or missing signature", 401, "d-2", "")
    click_through(driver, By.ID, "nav-system")
    github, gitlab = driver.find_elements(By.CSS_SELECTOR, "#webhooks tbody tr")
    assert github.text.startswith("github") and "202 refresh queued payments" in github.text
    assert hostile in github.text  # shown as text, never as markup
    assert gitlab.text.startswith("gitlab") and "401 refused: bad or missing signature" in gitlab.text
    assert not driver.find_elements(By.CSS_SELECTOR, "#webhooks img") and driver.title != "owned"


def test_logging_out_ends_the_session_so_its_cookie_put_back_opens_nothing(browser: tuple) -> None:
    driver, base, _ = browser
    session = driver.get_cookie(COOKIE)
    assert session and session["httpOnly"]
    click_through(driver, By.CSS_SELECTOR, "form.who button")
    assert "Logged out" in driver.find_element(By.ID, "login-notice").text
    assert driver.get_cookie(COOKIE) is None
    driver.add_cookie({"name": COOKIE, "value": session["value"], "path": "/"})  # a copy kept
    driver.get(base + "/questions")
    assert driver.find_elements(By.ID, "token") and not driver.find_elements(By.ID, "questions")
