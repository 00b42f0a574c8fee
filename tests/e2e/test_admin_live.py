"""The admin's live refresh in a real headless Chromium: figures change in place without
a reload, and stop while the tab is hidden."""

from __future__ import annotations

import time
from typing import Any

import pytest

from django_zqueue import get_queue
from django_zqueue.admin import QueueAdmin

pytest.importorskip("selenium")
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from .test_admin_browser import BASE, admin_login, browser, project  # noqa: F401 - fixtures
from .test_admin_browser import pytestmark as pytestmark


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(QueueAdmin, "refresh_seconds", 1)


def text_becomes(browser: WebDriver, css: str, value: str) -> None:  # noqa: F811
    WebDriverWait(browser, 15).until(lambda b: b.find_element(By.CSS_SELECTOR, css).text == value)


def set_hidden(browser: WebDriver, hidden: bool) -> None:  # noqa: F811
    browser.execute_script(
        "Object.defineProperty(document, 'hidden', {value: arguments[0], configurable: true});"
        "document.dispatchEvent(new Event('visibilitychange'));",
        hidden,
    )


def test_pages_refresh_in_place_and_pause_when_hidden(
    fast: None,
    project: dict[str, Any],  # noqa: F811
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
) -> None:
    default = get_queue("default")
    tags = [default.publish(i) for i in range(3)]
    browser.get(f"{admin_login}{BASE}")
    cell = "#result_list tbody tr:first-child td.zq-num"
    assert browser.find_element(By.CSS_SELECTOR, cell).text == "3"
    browser.execute_script("window.zqMark = 'same page'")
    for i in range(4):
        default.publish(i)
    text_becomes(browser, cell, "7")
    assert browser.execute_script("return window.zqMark") == "same page"  # no reload

    # hidden tab: no request, no change; shown again: refreshed at once
    set_hidden(browser, True)
    before = browser.execute_script("return document.querySelector('[data-zq-refresh]').dataset")
    default.publish("while hidden")
    time.sleep(2.5)  # more than two refresh periods
    after = browser.execute_script("return document.querySelector('[data-zq-refresh]').dataset")
    assert after.get("zqRefreshes") == before.get("zqRefreshes")
    assert browser.find_element(By.CSS_SELECTOR, cell).text == "7"
    set_hidden(browser, False)
    text_becomes(browser, cell, "8")

    # queue page: the line moves up as the head is claimed
    browser.get(f"{admin_login}{BASE}q/default/")
    first = "#result_list tbody tr:first-child th a"
    assert browser.find_element(By.CSS_SELECTOR, first).text == tags[0]
    default.claim(1)
    text_becomes(browser, first, tags[1])
    assert browser.find_element(By.CSS_SELECTOR, ".zq-tabs a.current .zq-badge").text == "7"

    # job page: its rank goes down
    browser.get(f"{admin_login}{BASE}q/default/job/?id={tags[2]}")
    assert browser.find_element(By.CSS_SELECTOR, ".zq-rank").text == "1"
    default.claim(1)
    text_becomes(browser, ".zq-rank", "0")
