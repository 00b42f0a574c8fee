"""Select all N (every job of a tab, across pages) and Retry now, in a real headless
Chromium."""

from __future__ import annotations

from typing import Any

import pytest

from django_zqueue import get_queue
from django_zqueue.queue import Queue

pytest.importorskip("selenium")
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from .test_admin_browser import (  # noqa: F401 - fixtures
    BASE,
    admin_login,
    browser,
    project,
)
from .test_admin_browser import pytestmark as pytestmark
from .test_admin_live import text_of


def bury(q: Queue, n: int, prefix: str) -> list[str]:
    tags = [f"{prefix}{i}" for i in range(n)]
    q.publish_many([{"task": "app.t", "args": [], "kwargs": {}}] * n, tags=tags)
    while msgs := q.claim(100)[0]:
        for m in msgs:
            q.nack(m, "RuntimeError: boom", dead=True)
    return tags


def shown(browser: WebDriver, css: str) -> bool:  # noqa: F811
    return bool(
        browser.execute_script(
            "var e = document.querySelector(arguments[0]); return !!e && e.offsetParent !== null",
            css,
        )
    )


def test_select_all_across_pages_then_retry_now(
    project: dict[str, Any],  # noqa: F811
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
) -> None:
    q = get_queue("default")
    bury(q, 60, "d")
    browser.get(f"{admin_login}{BASE}q/default/?state=dead&per_page=25")
    assert not shown(browser, "[data-zq-across]")
    browser.find_element(By.CSS_SELECTOR, "[data-zq-select-all]").click()
    assert shown(browser, "[data-zq-across-on]")
    assert "All 25 jobs of this page are selected." in text_of(browser, "[data-zq-across]")
    # clearing one row withdraws the offer; ticking the header again brings it back
    browser.find_elements(By.CSS_SELECTOR, "input[name=tags]")[0].click()
    assert not shown(browser, "[data-zq-across]")
    browser.find_element(By.CSS_SELECTOR, "[data-zq-select-all]").click()
    browser.find_element(By.CSS_SELECTOR, "[data-zq-across-on]").click()
    assert "All 60 jobs of this tab are selected." in text_of(browser, "[data-zq-across]")
    assert (
        browser.execute_script("return document.querySelector('[data-zq-across-input]').value")
        == "1"
    )
    browser.find_element(By.XPATH, "//button[text()='Requeue selected']").click()
    WebDriverWait(browser, 10).until(
        lambda b: "60 dead letters requeued." in text_of(b, ".messagelist")
    )
    assert q.counts()["dead"] == 0 and q.counts()["ready"] == 60

    # Retry now from a dead letter's page: first in line
    late = q.publish({"task": "app.t", "args": [], "kwargs": {}}, tag="late", priority=1000)
    msg = q.claim(1)[0][0]
    assert msg.tag == late
    q.nack(msg, "RuntimeError: late", dead=True)
    browser.get(f"{admin_login}{BASE}q/default/job/?id={late}")
    browser.find_element(By.XPATH, "//button[text()='Retry now']").click()
    WebDriverWait(browser, 10).until(
        lambda b: "requeued to the front of the line" in text_of(b, ".messagelist")
    )
    assert q.rank(late) == 0


def test_clear_selection_keeps_it_to_the_page(
    project: dict[str, Any],  # noqa: F811
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
) -> None:
    q = get_queue("default")
    bury(q, 30, "c")
    browser.get(f"{admin_login}{BASE}q/default/?state=dead&per_page=25")
    browser.find_element(By.CSS_SELECTOR, "[data-zq-select-all]").click()
    browser.find_element(By.CSS_SELECTOR, "[data-zq-across-on]").click()
    browser.find_element(By.CSS_SELECTOR, "[data-zq-across-off]").click()
    assert not shown(browser, "[data-zq-across]")
    assert not any(
        b.is_selected() for b in browser.find_elements(By.CSS_SELECTOR, "input[name=tags]")
    )
    boxes = browser.find_elements(By.CSS_SELECTOR, "input[name=tags]")
    boxes[0].click()
    browser.find_element(By.XPATH, "//button[text()='Retry selected now']").click()
    WebDriverWait(browser, 10).until(
        lambda b: "1 dead letter requeued to the front of the line." in text_of(b, ".messagelist")
    )
    assert q.counts()["dead"] == 29 and q.counts()["ready"] == 1
