"""The Finished tab (the history of finished jobs) and a finished job's page, in a real
headless Chromium: tabs, the filters by how the jobs ended, paging, the job page after the
end (result, duration, worker), and the search by tag finding a finished job. With
``ZQUEUE_SCREENSHOTS=1`` it also writes docs/images/finished.png and job-finished.png."""

from __future__ import annotations

import random
from typing import Any

import pytest

from django_zqueue import get_queue
from django_zqueue.queue import Queue

pytest.importorskip("selenium")
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from .test_admin_browser import (  # noqa: F401 - fixtures
    BASE,
    SCREENSHOTS,
    admin_login,
    browser,
    project,
    shoot,
)
from .test_admin_browser import pytestmark as pytestmark
from .test_admin_live import text_of

WORKERS = ("web-1:4242:a1b2/0", "web-1:4242:a1b2/1", "batch-2:77:c3d4/0")


def history(q: Queue) -> dict[str, str]:
    """60 jobs that succeeded (results kept, measured run times), 3 cancelled (two waiting,
    one running), 4 dead: what the Finished tab lists. Returns one tag of each."""
    rnd = random.Random(11)
    tags = q.publish_many(
        [
            {"task": "shop.tasks.send_receipt", "args": [1000 + i], "kwargs": {"lang": "en"}}
            for i in range(60)
        ]
    )
    for tag in tags:
        msg = q.get(consumer=rnd.choice(WORKERS))
        assert msg is not None and msg.tag == tag
        call = q.engine.consume.ack_call(msg, {"sent": True, "order": 1000 + tags.index(tag)}, 3600,
                                 run_ms=rnd.randint(40, 2400))  # fmt: skip
        assert q.engine.run(call)
    stopped = [q.publish({"task": "shop.reports.monthly", "args": [], "kwargs": {"m": i}})
               for i in range(3)]  # fmt: skip
    running = q.get(consumer=WORKERS[2])
    assert running is not None and running.tag == stopped[0]
    for tag in stopped:
        q.cancel(tag)
    for i in range(4):
        q.publish({"task": "shop.tasks.charge", "args": [i], "kwargs": {}}, tag=f"charge-{i}")
        msg = q.get(consumer=WORKERS[1])
        q.nack(msg, f"builtins.RuntimeError: card {i} declined", dead=True)  # type: ignore[arg-type]
    return {"succeeded": tags[-1], "first": tags[0], "cancelled": stopped[0], "dead": "charge-3"}


def rows(browser: WebDriver) -> list[Any]:  # noqa: F811
    return list(browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr"))


def test_finished_tab_filters_pages_and_job_page(
    project: dict[str, Any],  # noqa: F811
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
) -> None:
    url = admin_login
    q = get_queue("default")
    tags = history(q)
    q.publish({"task": "shop.tasks.send_receipt", "args": [1], "kwargs": {}})  # still waiting

    # the Finished tab, from the queue page: every way a job ended, newest first (the
    # sidebar folded, as for the other screenshots)
    browser.get(f"{url}/admin/")
    browser.execute_script("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
    browser.get(f"{url}{BASE}q/default/")
    tab = browser.find_element(By.PARTIAL_LINK_TEXT, "Finished")
    assert tab.find_element(By.CSS_SELECTOR, ".zq-badge").text == "67"
    tab.click()
    WebDriverWait(browser, 10).until(ec.url_contains("state=finished"))
    assert browser.find_element(By.CSS_SELECTOR, ".zq-tabs a.current").text.startswith("Finished")
    listed = rows(browser)
    assert len(listed) == 50
    first = [r.find_element(By.CSS_SELECTOR, "th a").text for r in listed[:5]]
    assert first[:4] == ["charge-3", "charge-2", "charge-1", "charge-0"]
    assert "card 3 declined" in listed[0].find_element(By.CSS_SELECTOR, ".zq-error").text
    filters = {
        a.get_attribute("data-zq-ended"): a.find_element(By.CSS_SELECTOR, ".zq-badge").text
        for a in browser.find_elements(By.CSS_SELECTOR, "#zq-ended a")
    }
    assert filters == {
        "all": "67",
        "succeeded": "60",
        "dead": "4",
        "cancelled": "3",
        "expired": "0",
    }
    if SCREENSHOTS:  # a page of 25, as the other screenshots
        browser.get(f"{url}{BASE}q/default/?state=finished&per_page=25")
        shoot(browser, "finished")
        browser.back()

    # only the jobs that succeeded, paged: 60 over three pages of 25
    browser.find_element(By.CSS_SELECTOR, '#zq-ended a[data-zq-ended="succeeded"]').click()
    WebDriverWait(browser, 10).until(ec.url_contains("ended=succeeded"))
    states = {r.find_element(By.CSS_SELECTOR, ".zq-state").text for r in rows(browser)}
    assert states == {"SUCCEEDED"}
    browser.get(f"{url}{BASE}q/default/?state=finished&ended=succeeded&per_page=25")
    assert rows(browser)[0].find_element(By.CSS_SELECTOR, "th a").text == tags["succeeded"]
    browser.find_element(By.CSS_SELECTOR, "a[rel=next]").click()
    WebDriverWait(browser, 10).until(ec.url_contains("page=2"))
    assert "ended=succeeded" in browser.current_url
    browser.find_element(By.CSS_SELECTOR, "nav.paginator a.end").click()
    WebDriverWait(browser, 10).until(ec.url_contains("page=3"))
    last = rows(browser)
    assert len(last) == 10 and last[-1].find_element(By.CSS_SELECTOR, "th a").text == tags["first"]

    # a job that succeeded: its page answers after the end
    last[-1].find_element(By.CSS_SELECTOR, "th a").click()
    WebDriverWait(browser, 10).until(ec.url_contains("/job/?id="))
    assert text_of(browser, ".zq-state") == "SUCCEEDED"
    page = text_of(browser, "#content-main")
    assert "shop.tasks.send_receipt" in page and "Duration" in page
    assert any(w in page for w in WORKERS)
    assert '"order": 1000' in text_of(browser, "#zq-result-value")
    shoot(browser, "job-finished")
    # its state links back to the Finished tab, filtered
    browser.find_element(By.CSS_SELECTOR, "table.zq-detail caption a").click()
    WebDriverWait(browser, 10).until(ec.url_contains("ended=succeeded"))

    # the cancelled ones, and a cancelled job's page
    browser.find_element(By.CSS_SELECTOR, '#zq-ended a[data-zq-ended="cancelled"]').click()
    WebDriverWait(browser, 10).until(ec.url_contains("ended=cancelled"))
    assert len(rows(browser)) == 3
    browser.get(f"{url}{BASE}q/default/job/?id={tags['cancelled']}")
    assert text_of(browser, ".zq-state") == "CANCELLED"
    assert "was leased" in text_of(browser, "#content-main")

    # the search by tag finds a finished job
    browser.get(f"{url}{BASE}")
    box = browser.find_element(By.ID, "searchbar")
    box.send_keys(tags["first"])
    box.submit()
    WebDriverWait(browser, 10).until(ec.url_contains("/job/?id="))
    assert text_of(browser, ".zq-state") == "SUCCEEDED"
