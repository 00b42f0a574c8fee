"""The widget's streamed text in a real headless Chromium: a job streaming 500 chunks
reaches the page whole and in order, across reconnects of the event source (each
response kept open one second here), with no gap and no duplicate."""

from __future__ import annotations

import time
from typing import Any

import pytest

from django_zqueue import get_queue
from django_zqueue.tasks import watch

pytest.importorskip("selenium")
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from .test_admin_browser import browser, project  # noqa: F401 - fixtures
from .test_admin_browser import pytestmark as pytestmark


def test_500_streamed_chunks_reach_the_page_in_order_across_reconnects(
    project: dict[str, Any],  # noqa: F811
    live_server: Any,
    browser: WebDriver,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django_zqueue.web import stream

    monkeypatch.setattr(stream, "WINDOW", 1.0)  # a reconnect every second or so
    watch._watches.clear()
    default = get_queue("default")
    browser.delete_all_cookies()
    browser.get(f"{live_server.url}/demo/wait/")
    browser.find_element(By.XPATH, "//button[text()='Start a report']").click()
    # the click posts a form: the widget is on the page it leads to, once that has loaded
    box = WebDriverWait(browser, 15).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, "[data-zq-position]"))
    )
    WebDriverWait(browser, 15).until(lambda b: box.get_attribute("data-zq-ahead") == "0")
    mine = default.claim(1)[0][0]
    WebDriverWait(browser, 15).until(lambda b: box.get_attribute("data-zq-status") == "running")
    want = []
    for i in range(500):
        want.append(f"[{i}]")
        default.engine.jobstreams.append(mine.tag, want[-1])
        if i == 250:  # mid-stream, let the connection end and come back
            WebDriverWait(browser, 15).until(lambda b: box.get_attribute("data-zq-chunks") == "251")
            time.sleep(2.5)  # past the window and the 1 s retry: the source reconnected
    WebDriverWait(browser, 30).until(lambda b: box.get_attribute("data-zq-chunks") == "500")
    out = browser.find_element(By.CSS_SELECTOR, "[data-zq-output]")
    assert out.is_displayed() and out.text == "".join(want)
    default.ack(mine)
    WebDriverWait(browser, 15).until(lambda b: box.get_attribute("data-zq-status") == "done")
    assert out.text == "".join(want)
