"""The admin's live refresh in a real headless Chromium: figures change in place without
a reload, and stop while the tab is hidden."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import override_settings

from django_zqueue import get_queue
from django_zqueue.admin import QueueAdmin

pytest.importorskip("selenium")
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from .test_admin_browser import (  # noqa: F401 - fixtures
    BASE,
    admin_login,
    browser,
    demo_data,
    project,
    shoot,
)
from .test_admin_browser import pytestmark as pytestmark


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(QueueAdmin, "refresh_seconds", 1)


def text_of(browser: WebDriver, css: str) -> str:  # noqa: F811
    """Read in one step: a refresh may replace the element between a find and a read."""
    return str(
        browser.execute_script(
            "var e = document.querySelector(arguments[0]); return e ? e.innerText.trim() : null",
            css,
        )
    )


def text_becomes(browser: WebDriver, css: str, value: str) -> None:  # noqa: F811
    WebDriverWait(browser, 15).until(lambda b: text_of(b, css) == value)


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
    assert text_of(browser, cell) == "3"
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
    assert text_of(browser, cell) == "7"
    set_hidden(browser, False)
    text_becomes(browser, cell, "8")

    # queue page: the line moves up as the head is claimed
    browser.get(f"{admin_login}{BASE}q/default/")
    first = "#result_list tbody tr:first-child th a"
    assert text_of(browser, first) == tags[0]
    default.claim(1)
    text_becomes(browser, first, tags[1])
    text_becomes(browser, ".zq-tabs a.current .zq-badge", "7")

    # job page: its rank goes down
    browser.get(f"{admin_login}{BASE}q/default/job/?id={tags[2]}")
    assert text_of(browser, ".zq-rank") == "1"
    default.claim(1)
    text_becomes(browser, ".zq-rank", "0")


def test_each_action_from_the_browser(
    project: dict[str, Any],  # noqa: F811
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
) -> None:
    q = get_queue("default")
    waiting = [q.publish(i) for i in range(4)]
    # select every job of the page, cancel: a confirmation page first
    browser.get(f"{admin_login}{BASE}q/default/?per_page=25")
    browser.find_element(By.CSS_SELECTOR, "[data-zq-select-all]").click()
    boxes = browser.find_elements(By.CSS_SELECTOR, "input[name=tags]")
    assert len(boxes) == 4 and all(b.is_selected() for b in boxes)
    boxes[0].click()  # all but the first
    browser.find_element(By.XPATH, "//button[text()='Cancel selected']").click()
    WebDriverWait(browser, 10).until(lambda b: "Cancel 3 jobs?" in b.page_source)
    assert q.counts()["ready"] == 4  # nothing yet
    browser.find_element(By.CSS_SELECTOR, 'input[type=submit][value="Yes, I\u2019m sure"]').click()
    WebDriverWait(browser, 10).until(lambda b: "3 jobs cancelled." in text_of(b, ".messagelist"))
    assert [q.state(t) for t in waiting] == ["ready", None, None, None]

    # dead letters: requeue one, delete one (confirmed), purge the rest (confirmed)
    for m in q.claim(1)[0]:
        q.nack(m, "boom", dead=True)
    dead = [q.publish(f"d{i}") for i in range(3)]
    for m in q.claim(3)[0]:
        q.nack(m, "boom", dead=True)
    browser.get(f"{admin_login}{BASE}q/default/?state=dead")
    assert len(browser.find_elements(By.CSS_SELECTOR, "input[name=tags]")) == 4
    browser.find_element(By.CSS_SELECTOR, f"input[name=tags][value='{dead[0]}']").click()
    browser.find_element(By.XPATH, "//button[text()='Requeue selected']").click()
    WebDriverWait(browser, 10).until(lambda b: "1 dead letter requeued." in b.page_source)
    assert q.state(dead[0]) == "ready"
    browser.find_element(By.CSS_SELECTOR, f"input[name=tags][value='{dead[1]}']").click()
    browser.find_element(By.XPATH, "//button[text()='Delete selected']").click()
    WebDriverWait(browser, 10).until(lambda b: "This cannot be undone" in b.page_source)
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda b: "1 dead letter deleted." in b.page_source)
    assert q.state(dead[1]) is None
    browser.find_element(By.CSS_SELECTOR, ".zq-purge button").click()
    WebDriverWait(browser, 10).until(lambda b: "Yes, purge them" in b.page_source)
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda b: "Purged 2 dead letters" in b.page_source)
    assert q.counts()["dead"] == 0


def test_new_pages_render_in_the_browser(
    project: dict[str, Any],  # noqa: F811
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
    redis_client: Any,
) -> None:
    """Workers, filters, task statistics, a confirmation, the 403 and the end user's
    widget, as a browser shows them (and their screenshots with ZQUEUE_SCREENSHOTS=1)."""
    from django_zqueue.worker import taskstats
    from django_zqueue.worker.leases import Leases

    data = demo_data(redis_client)
    default = data["default"]
    Leases("web-1:4242:a1b2", [default, data["emails"]], threads=8).register()
    default.claim(2, consumer="web-1:4242:a1b2")
    now = taskstats.slot_now()
    stats = ((now, "testproject.demo.tasks.add"), (now - 1, "testproject.demo.tasks.sleep"))
    for slot, task in stats:
        fields = {f"{task}|n": 120, f"{task}|f": 3, f"{task}|r": 2, f"{task}|s": 120 * 180}
        fields.update({f"{task}|b{b}": 10 for b in (6, 7, 8, 9)})
        redis_client.hset(default.engine._keys.task_stats(slot), mapping=fields)
    browser.get(f"{admin_login}{BASE}workers/")
    assert "web-1:4242:a1b2" in browser.page_source, text_of(browser, "#content-main")
    assert len(browser.find_elements(By.CSS_SELECTOR, ".zq-held tbody tr")) == 2
    shoot(browser, "workers")
    browser.get(f"{admin_login}{BASE}q/default/?task=sleep")
    assert "matches in jobs 1" in text_of(browser, ".zq-scan")
    assert text_of(browser, "#zq-tasks tbody tr:first-child th") == "testproject.demo.tasks.add"
    shoot(browser, "filter")
    browser.get(f"{admin_login}{BASE}q/emails/?state=dead&error=refused")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")) == 8
    shoot(browser, "dead-filter")
    browser.find_element(By.CSS_SELECTOR, "[data-zq-select-all]").click()
    browser.find_element(By.XPATH, "//button[text()='Delete selected']").click()
    WebDriverWait(browser, 10).until(lambda b: "Delete 8 dead letters" in b.page_source)
    shoot(browser, "confirm")
    # a fair queue's Groups table (docs/fairness.md): the biggest groups first
    fair = {**project, "QUEUES": {**project["QUEUES"], "tenants": {"fairness": "groups"}}}
    with override_settings(ZQUEUE=fair):
        tenants = get_queue("tenants")
        for name, n in (("acme", 40), ("globex", 12), ("initech", 5)):
            tenants.publish_many(
                [{"task": "shop.tasks.export", "args": [i]} for i in range(n)], group=name
            )
        tenants.claim(9, consumer="web-1:4242:a1b2")
        browser.get(f"{admin_login}{BASE}q/tenants/?per_page=25")
        rows = browser.find_elements(By.CSS_SELECTOR, "#zq-groups tbody tr th")
        assert [r.text for r in rows] == ["acme", "globex", "initech"]
        shoot(browser, "groups")
        tenants.clear()
    # the 403 of a staff user without the view permission
    from django.contrib.auth.models import User

    User.objects.create_user("staff", password="secret-pw", is_staff=True)
    browser.delete_all_cookies()
    browser.get(f"{admin_login}/admin/login/")
    browser.find_element(By.ID, "id_username").send_keys("staff")
    browser.find_element(By.ID, "id_password").send_keys("secret-pw")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    # logged in (the login's redirect done) before the next page: else the redirect to
    # the admin index may land after it
    WebDriverWait(browser, 10).until(lambda b: "/admin/login/" not in b.current_url)
    browser.get(f"{admin_login}{BASE}")
    assert "Can view queue" in text_of(browser, "#content-main")
    shoot(browser, "forbidden")
    # the end user's page
    browser.get(f"{admin_login}/demo/wait/")
    browser.find_element(By.XPATH, "//button[text()='Start a report']").click()
    WebDriverWait(browser, 10).until(lambda b: "ahead of yours" in text_of(b, "[data-zq-position]"))
    shoot(browser, "position")


def test_run_now_priority_and_pause_from_the_browser(
    project: dict[str, Any],  # noqa: F811
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
) -> None:
    q = get_queue("default")
    tags = [q.publish(i) for i in range(4)]
    browser.get(f"{admin_login}{BASE}q/default/?per_page=25")
    browser.find_element(By.CSS_SELECTOR, f"input[name=tags][value='{tags[3]}']").click()
    browser.find_element(By.XPATH, "//button[text()='Run selected now']").click()
    WebDriverWait(browser, 10).until(lambda b: "moved to the front" in text_of(b, ".messagelist"))
    assert q.rank(tags[3]) == 0

    browser.find_element(By.CSS_SELECTOR, f"input[name=tags][value='{tags[2]}']").click()
    box = browser.find_element(By.CSS_SELECTOR, "input[name=value]")
    box.clear()
    box.send_keys("9")
    browser.find_element(By.XPATH, "//button[text()='Set priority']").click()
    WebDriverWait(browser, 10).until(lambda b: "new priority" in text_of(b, ".messagelist"))
    assert q.rank(tags[2]) == 0 and q.info(tags[2]).priority == 9  # type: ignore[union-attr]

    browser.find_element(By.XPATH, "//button[text()='Pause queue']").click()
    # it asks first, saying how many ready jobs will wait (on a page of its own: wait for it)
    yes = "input[type=submit][value^='Yes']"
    WebDriverWait(browser, 10).until(lambda b: b.find_elements(By.CSS_SELECTOR, yes))[0].click()
    WebDriverWait(browser, 10).until(lambda b: "default paused" in text_of(b, ".messagelist"))
    assert q.is_paused() and q.claim(1) == ([], None)
    browser.find_element(By.XPATH, "//button[text()='Resume queue']").click()
    # the paused page itself says "until it is resumed": wait for the message, not the word
    WebDriverWait(browser, 10).until(lambda b: "default resumed." in text_of(b, ".messagelist"))
    assert "Paused:" not in text_of(browser, "#content-main")
    assert not q.is_paused()
