"""The end user's "place in line" widget in a real headless Chromium: the demo page of
testproject, its number going down as the jobs ahead leave the line (long-poll), the
progress a running job reports, and a cancelled job said to be cancelled."""

from __future__ import annotations

from typing import Any

import pytest

from django_zqueue import get_queue
from django_zqueue.tasks import watch

pytest.importorskip("selenium")
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from .test_admin_browser import browser, project, shoot  # noqa: F401 - fixtures
from .test_admin_browser import pytestmark as pytestmark


def attribute_becomes(browser: WebDriver, name: str, value: str) -> None:  # noqa: F811
    WebDriverWait(browser, 15).until(
        lambda b: b.find_element(By.CSS_SELECTOR, "[data-zq-position]").get_attribute(name) == value
    )


def test_widget_counts_down_live(
    project: dict[str, Any],  # noqa: F811
    live_server: Any,
    browser: WebDriver,  # noqa: F811
) -> None:
    watch._watches.clear()
    default = get_queue("default")
    ahead = [default.publish({"task": "someone.else", "args": [i]}) for i in range(3)]
    browser.delete_all_cookies()
    browser.get(f"{live_server.url}/demo/wait/")
    browser.find_element(By.XPATH, "//button[text()='Start a report']").click()
    attribute_becomes(browser, "data-zq-ahead", "3")
    box = browser.find_element(By.CSS_SELECTOR, "[data-zq-position] [role=status]")
    assert box.get_attribute("aria-live") == "polite"
    assert box.text.startswith("3 jobs ahead of yours.")
    for left in ("2", "1", "0"):
        msgs, _ = default.claim(1)
        assert msgs[0].tag in ahead
        default.ack(msgs[0])
        attribute_becomes(browser, "data-zq-ahead", left)  # no reload: the page long-polls
    assert box.text.startswith("Next in line.")
    mine = default.claim(1)[0][0]
    attribute_becomes(browser, "data-zq-status", "running")
    assert box.text.startswith("Running now.")
    default.ack(mine)
    attribute_becomes(browser, "data-zq-status", "done")
    assert box.text == "Done."


def test_widget_shows_progress_then_cancelled(
    project: dict[str, Any],  # noqa: F811
    live_server: Any,
    browser: WebDriver,  # noqa: F811
) -> None:
    watch._watches.clear()
    default = get_queue("default")
    browser.delete_all_cookies()
    browser.get(f"{live_server.url}/demo/wait/")
    browser.find_element(By.XPATH, "//button[text()='Start a report']").click()
    attribute_becomes(browser, "data-zq-ahead", "0")
    bar = browser.find_element(By.CSS_SELECTOR, "[data-zq-position] progress")
    assert not bar.is_displayed()
    mine = default.claim(1)[0][0]
    default.touch(mine, progress=0.25, note="reading")
    box = browser.find_element(By.CSS_SELECTOR, "[data-zq-position] [role=status]")
    WebDriverWait(browser, 15).until(lambda b: box.text == "Running now: 25% done (reading).")
    assert bar.is_displayed() and bar.get_attribute("value") == "25"
    shoot(browser, "position-running")
    default.touch(mine, progress=0.5, note="reading")
    WebDriverWait(browser, 15).until(lambda b: bar.get_attribute("value") == "50")
    assert default.cancel(mine.tag)
    attribute_becomes(browser, "data-zq-status", "cancelled")
    assert box.text == "Cancelled: it will not run." and not bar.is_displayed()
