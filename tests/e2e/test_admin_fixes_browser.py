"""Defects of the admin, driven in a real headless Chromium as an operator meets them: the
Ready tab of a queue with ``priority_mode="aging"`` and its pause/resume, a running job
ticked and cancelled from the In-flight tab, the contrast of caption notes and of the
waiting job's state badge as Chromium computes them."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from django_zqueue import get_queue

pytest.importorskip("selenium")
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from .test_admin_browser import (  # noqa: F401 - fixtures
    BASE,
    IMAGES,
    SCREENSHOTS,
    admin_login,
    browser,
    demo_data,
    project,
)
from .test_admin_browser import pytestmark as pytestmark


def rows(browser: WebDriver) -> list[Any]:  # noqa: F811
    return list(browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr"))


def test_the_ready_tab_of_an_aging_queue_and_pause_resume(
    project: dict[str, Any],  # noqa: F811
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
) -> None:
    reports = get_queue("reports")  # testproject's queue with priority_mode="aging"
    tags = [
        reports.publish({"task": "shop.reports.monthly", "args": [i]}, priority=i % 2)
        for i in range(4)
    ]
    browser.get(f"{admin_login}{BASE}q/reports/")
    assert browser.title.startswith("Queue reports")
    listed = [r.find_element(By.CSS_SELECTOR, "th a").text for r in rows(browser)]
    assert sorted(listed) == sorted(tags) and [reports.rank(t) for t in listed] == [0, 1, 2, 3]
    for button, after in (("Pause queue", "Resume queue"), ("Resume queue", "Pause queue")):
        browser.find_element(By.XPATH, f"//button[text()='{button}']").click()
        if button == "Pause queue":  # it asks first (a page of its own), saying how many wait
            found = WebDriverWait(browser, 10).until(
                lambda b: b.find_elements(By.CSS_SELECTOR, "input[type=submit][value^='Yes']")
            )
            assert "Its 4 ready jobs wait" in browser.page_source
            found[0].click()
        WebDriverWait(browser, 10).until(
            lambda b, after=after: b.find_elements(By.XPATH, f"//button[text()='{after}']")
        )
        assert browser.title.startswith("Queue reports") and len(rows(browser)) == 4
    assert not reports.is_paused()


def test_a_running_job_is_ticked_and_cancelled_from_the_in_flight_tab(
    project: dict[str, Any],  # noqa: F811
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
) -> None:
    q = get_queue("default")
    for i in range(2):
        q.publish({"task": "t.run", "args": [i]})
    q.claim(2, consumer="host:1:w/0")
    browser.get(f"{admin_login}{BASE}q/default/?state=leased")
    heads = browser.find_elements(By.CSS_SELECTOR, "#result_list thead th")
    assert [h.text.lower() for h in heads][1:3] == ["job", "task"]
    for row in rows(browser):  # each cell under its header
        cells = row.find_elements(By.CSS_SELECTOR, "td, th")
        assert len(cells) == len(heads)
        assert [c.location["x"] for c in cells] == [h.location["x"] for h in heads]
    box = rows(browser)[0].find_element(By.CSS_SELECTOR, "input[name=tags]")
    chosen = box.get_attribute("value")
    box.click()
    browser.find_element(By.XPATH, "//button[text()='Cancel selected']").click()
    WebDriverWait(browser, 10).until(lambda b: "Cancel 1 job?" in b.page_source)
    browser.find_element(By.CSS_SELECTOR, 'input[type=submit][value="Yes, I\u2019m sure"]').click()
    WebDriverWait(browser, 10).until(lambda b: "1 job cancelled." in b.page_source)
    assert "state=leased" in browser.current_url and len(rows(browser)) == 1
    assert q.state(str(chosen)) is None and q.counts()["inflight"] == 1


CONTRAST_JS = """
function lum(c) {
  var v = c.match(/[0-9.]+/g).slice(0, 3).map(function (x) {
    x = x / 255; return x <= 0.04045 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4);
  });
  return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
}
function bg(e) {
  for (; e; e = e.parentElement) {
    var c = getComputedStyle(e).backgroundColor;
    if (c && c !== 'rgba(0, 0, 0, 0)' && c !== 'transparent') return c;
  }
  return 'rgb(255, 255, 255)';
}
return Array.prototype.map.call(document.querySelectorAll(arguments[0]), function (e) {
  var a = lum(getComputedStyle(e).color), b = lum(bg(e));
  return [e.textContent.trim(), (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)];
});
"""


def test_caption_notes_and_the_waiting_badge_are_readable(
    project: dict[str, Any],  # noqa: F811
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
) -> None:
    q = get_queue("default")
    kid = q.publish({"task": "t.kid"}, depends_on=[q.publish({"task": "t.parent"})])
    for theme in ("light", "dark"):
        browser.get(f"{admin_login}{BASE}")
        browser.execute_script("localStorage.setItem('theme', arguments[0])", theme)
        browser.get(f"{admin_login}{BASE}q/default/")
        notes = browser.execute_script(CONTRAST_JS, ".module caption .quiet")
        assert notes and all(ratio >= 4.5 for _, ratio in notes), (theme, notes)
        browser.get(f"{admin_login}{BASE}q/default/job/?id={kid}")
        badges = browser.execute_script(CONTRAST_JS, ".zq-state")
        assert [text.lower() for text, _ in badges][:2] == ["waiting", "waiting"]
        assert all(ratio >= 4.5 for _, ratio in badges), (theme, badges)
    browser.execute_script("localStorage.removeItem('theme')")


PAGE_WIDTH_JS = """
var d = document.documentElement, box = document.getElementById('searchbar');
var wide = Array.prototype.filter.call(document.querySelectorAll('body *'), function (e) {
  var r = e.getBoundingClientRect();
  return r.width > 0 && r.right > d.clientWidth + 1 && !e.closest('.results, .zq-scroll');
}).slice(0, 5).map(function (e) { return e.tagName + '.' + e.className + '#' + e.id; });
return {scroll: d.scrollWidth, client: d.clientWidth, wide: wide,
        search: box ? box.getBoundingClientRect().width : null};
"""


def test_at_390_px_no_page_scrolls_sideways_and_the_find_box_is_usable(
    project: dict[str, Any],  # noqa: F811
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    demo_data(redis_client)
    q = get_queue("default")
    tag = q.read.listing("ready", 1, 1).jobs[0].tag
    urls = {
        "overview": BASE,
        "ready": f"{BASE}q/default/",
        "in flight": f"{BASE}q/default/?state=leased",
        "dead": f"{BASE}q/emails/?state=dead",
        "job": f"{BASE}q/default/job/?id={tag}",
        "search": f"{BASE}search/?q=nothing-like-it",
        "workers": f"{BASE}workers/",
        "schedules": f"{BASE}schedules/",
    }
    browser.set_window_size(390, 844)
    try:
        for name, url in urls.items():
            browser.get(f"{admin_login}{url}")
            got = browser.execute_script(PAGE_WIDTH_JS)
            assert got["scroll"] <= got["client"], (name, got)
            if got["search"] is not None:
                assert got["search"] >= 200, (name, got)
        if SCREENSHOTS:
            browser.get(f"{admin_login}{BASE}q/default/")
            browser.save_screenshot(str(IMAGES / "queue-narrow.png"))
    finally:
        browser.set_window_size(1280, 900)


def test_a_chart_shows_each_value_under_the_pointer(
    project: dict[str, Any],  # noqa: F811
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    demo_data(redis_client)
    browser.get(f"{admin_login}{BASE}")
    first = browser.find_element(By.CSS_SELECTOR, ".zq-chart")  # default's depth
    hit = first.find_elements(By.CSS_SELECTOR, ".zq-hit")[-1]  # now
    ActionChains(browser).move_to_element(hit).perform()
    under = browser.execute_script(
        "var r = arguments[0].getBoundingClientRect();"
        "var e = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);"
        "return [e.getAttribute('class'), e.querySelector('title').textContent,"
        " getComputedStyle(e).fillOpacity];",
        hit,
    )
    assert under[0] == "zq-hit" and under[1].endswith(
        f": ready {get_queue('default').counts()['ready']}"
    )
    assert float(under[2]) > 0  # the hovered sample is marked
