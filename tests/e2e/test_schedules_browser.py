"""The schedules page in a real headless Chromium: an operator adds a schedule from the
form, pauses it and runs it now from its buttons; Redis is checked after each click."""

from __future__ import annotations

from typing import Any

import pytest

from django_zqueue import get_queue, schedules
from django_zqueue.engine import schedstore

pytest.importorskip("selenium")
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait

from .test_admin_browser import (  # noqa: F401 - fixtures
    BASE,
    admin_login,
    browser,
    project,
)
from .test_admin_browser import pytestmark as pytestmark

RECORD = "testproject.demo.tasks.record"


def gone(element: Any) -> bool:
    """Whether ``element`` has left the document. Chromedriver answers a node detached
    mid-navigation either as a stale reference or, racing the new document, as an
    "unknown error" saying the node does not belong to the document: both mean gone."""
    try:
        element.is_enabled()
    except StaleElementReferenceException:
        return True
    except WebDriverException as exc:
        if "does not belong to the document" in (exc.msg or ""):
            return True
        raise
    return False


def click(browser: WebDriver, name: str, op: str) -> None:  # noqa: F811
    """Press ``op`` on schedule ``name``'s row and wait for the page the POST answers with
    (the page before may already show a success message: wait for it to go first)."""
    before = browser.find_element(By.TAG_NAME, "html")
    row = browser.find_element(By.CSS_SELECTOR, f'tr[data-schedule="{name}"]')
    row.find_element(By.CSS_SELECTOR, f'button[value="{op}"]').click()
    WebDriverWait(browser, 10).until(lambda _b: gone(before))
    WebDriverWait(browser, 10).until(
        lambda b: b.find_elements(By.CSS_SELECTOR, ".messagelist li.success")
    )


def test_add_pause_and_run_now_from_the_browser(
    project: dict[str, Any],  # noqa: F811
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
) -> None:
    browser.get(f"{admin_login}{BASE}")
    browser.find_element(By.CSS_SELECTOR, "#zq-schedules caption a").click()
    assert browser.title.startswith("Periodic schedules")
    browser.find_element(By.ID, "zq-s-name").send_keys("nightly-report")
    Select(browser.find_element(By.ID, "zq-s-task")).select_by_value(RECORD)
    browser.find_element(By.ID, "zq-s-cron").send_keys("0 3 * * *")
    browser.find_element(By.ID, "zq-s-args").send_keys('["ledger", 7]')
    browser.find_element(By.CSS_SELECTOR, "#zq-schedule-add input[type=submit]").submit()
    WebDriverWait(browser, 10).until(
        lambda b: b.find_elements(By.CSS_SELECTOR, 'tr[data-schedule="nightly-report"]')
    )
    q = get_queue("default")
    st = schedstore.stored(q, ["nightly-report"])[0]
    assert st.source == "runtime" and st.next_ms is not None
    assert st.definition["args"] == ["ledger", 7]

    click(browser, "nightly-report", "pause")
    assert schedules.get("nightly-report").paused
    assert schedstore.stored(q, ["nightly-report"])[0].next_ms is None
    row = browser.find_element(By.CSS_SELECTOR, 'tr[data-schedule="nightly-report"]')
    assert "paused" in row.find_element(By.CSS_SELECTOR, ".zq-next").text
    assert row.find_elements(By.CSS_SELECTOR, 'button[value="resume"]')

    click(browser, "nightly-report", "run")
    ready = [t.decode() for t in q.engine._client.zrange(q.engine._keys.ready, 0, -1)]
    assert len(ready) == 1
    info = q.info(ready[0])
    assert info is not None and info.body["schedule"] == "nightly-report"
    assert info.body["args"] == ["ledger", 7]
    assert schedules.get("nightly-report").paused  # run now leaves it paused
    message = browser.find_element(By.CSS_SELECTOR, ".messagelist li.success").text
    assert ready[0] in message
