"""The admin dashboard in a real headless Chromium, driven by Selenium.

Needs Debian's ``chromium`` and ``chromium-driver`` (or $ZQUEUE_CHROMIUM and
$ZQUEUE_CHROMEDRIVER) and the ``selenium`` package; the tests skip, saying which is
missing, without them (and fail instead with ZQUEUE_REQUIRE_BROWSER=1). With
``ZQUEUE_SCREENSHOTS=1`` the run also writes the screenshots of docs/images/
(overview.png, queue.png, in-flight.png, job.png, dead.png, overview-dark.png), from
generated demo data.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.test import override_settings

from django_zqueue import conf, get_queue
from django_zqueue.queue import Queue
from testproject.demo import tasks

from ..redis_server import redis_url

try:
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # pragma: no cover - depends on the environment
    webdriver = None

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "docs" / "images"
CHROMIUM = os.environ.get("ZQUEUE_CHROMIUM") or next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None
)
CHROMEDRIVER = os.environ.get("ZQUEUE_CHROMEDRIVER") or (
    "/usr/bin/chromedriver"
    if Path("/usr/bin/chromedriver").exists()
    else shutil.which("chromedriver")
)
SCREENSHOTS = os.environ.get("ZQUEUE_SCREENSHOTS") == "1"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--window-size=1280,900",
]

#: with ZQUEUE_REQUIRE_BROWSER=1 (CI, once it installs them) a missing browser fails
REQUIRED = os.environ.get("ZQUEUE_REQUIRE_BROWSER") == "1"
MISSING = (
    "selenium is not installed (pip install selenium)"
    if webdriver is None
    else "chromium is not installed (apt-get install chromium chromium-driver)"
    if CHROMIUM is None
    else "chromedriver is not installed (apt-get install chromium-driver)"
    if CHROMEDRIVER is None
    else None
)

pytestmark = [
    pytest.mark.skipif(MISSING is not None and not REQUIRED, reason=str(MISSING)),
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
]

BASE = "/admin/django_zqueue/queue/"


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    if MISSING is not None:
        pytest.fail(f"ZQUEUE_REQUIRE_BROWSER=1 but {MISSING}")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tempfile.mkdtemp(prefix="zq-chromium-")
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    try:
        driver = webdriver.Chrome(
            service=Service(executable_path=str(CHROMEDRIVER)), options=options
        )
    except WebDriverException as exc:  # pragma: no cover - a broken install
        shutil.rmtree(profile, ignore_errors=True)
        if REQUIRED:
            raise
        pytest.skip(f"chromium did not start: {exc.msg}")
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def project(prefix: str) -> Iterator[dict[str, Any]]:
    value = {
        **settings.ZQUEUE,
        "REDIS_URL": redis_url(),
        "PREFIX": prefix,
        "ENQUEUE_ON_COMMIT": False,
    }
    with override_settings(ZQUEUE=value):
        yield value
    conf.reset()


@pytest.fixture
def admin_login(live_server: Any, browser: WebDriver) -> str:
    User.objects.create_superuser("admin", "admin@example.com", "secret-pw")
    browser.delete_all_cookies()
    browser.get(f"{live_server.url}/admin/login/")
    browser.find_element(By.ID, "id_username").send_keys("admin")
    browser.find_element(By.ID, "id_password").send_keys("secret-pw")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    WebDriverWait(browser, 10).until(ec.presence_of_element_located((By.ID, "user-tools")))
    return str(live_server.url)


def demo_data(redis_client: redis.Redis) -> dict[str, Any]:
    """Something to look at: three queues with waiting, delayed, running and dead jobs,
    live workers, and an hour of per-minute history."""
    rnd = random.Random(7)
    default, emails, reports = (get_queue(n) for n in ("default", "emails", "reports"))
    for i in range(180):
        tasks.add.using(priority=rnd.choice([0, 0, 0, 5, -3])).enqueue(i, rnd.randint(1, 99))
    for i in range(40):
        tasks.sleep.enqueue(rnd.choice([0.5, 1, 2]), value=f"batch-{i}")
    for i in range(12):
        tasks.add.enqueue_in(60 * (i + 1), i, i)
    for i in range(30):
        emails.publish(
            {"task": "shop.tasks.send_receipt", "args": [1000 + i], "kwargs": {"lang": "en"}}
        )
    for i in range(6):
        reports.publish(
            {"task": "shop.reports.monthly", "args": [], "kwargs": {"month": f"2024-{i + 1:02}"}}
        )
    # in flight, with progress
    for j, m in enumerate(default.claim(3, consumer="web-1:4242:a1b2/0")[0]):
        default.touch(m, progress=[0.15, 0.6, 0.85][j], note=["fetching", "rendering", "upload"][j])
    for m in reports.claim(2, consumer="batch-2:77:c3d4/1")[0]:
        reports.touch(m, progress=0.3, note="aggregating")
    # dead letters, with a real traceback
    doomed = [
        emails.publish(
            {"task": "shop.tasks.send_receipt", "args": [9000 + i], "kwargs": {"lang": "de"}},
            priority=10,
        )
        for i in range(8)
    ]
    for m in emails.claim(8, consumer="web-2:5151:e5f6/2")[0]:
        try:
            raise ConnectionRefusedError(f"SMTP server smtp.example.com:587 refused order {m.tag}")
        except ConnectionRefusedError as exc:
            error = f"builtins.ConnectionRefusedError: {exc}\n{traceback.format_exc()}"
        emails.nack(m, error, dead=True)
    # live workers and an hour of history (written straight into the stats ring)
    seen = int(time.time() * 1000)
    for q, threads in ((default, 8), (emails, 4), (reports, 2)):
        worker = {"threads": threads, "seen": seen, "host": "web-1", "pid": 4242}
        redis_client.hset(q.engine._keys.workers, f"web-1:4242:{q.name}", json.dumps(worker))
    secs, _ = redis_client.time()
    now_minute = int(secs) // 60
    for q, scale in ((default, 40), (emails, 12), (reports, 2)):
        depth = q.counts()["ready"]  # walk back from the real depth
        fields: dict[str, int] = {}
        for back in range(1, 60):
            minute = now_minute - back
            slot = minute % 64
            enq = int(scale * (1 + 0.6 * math.sin(back / 7)) + rnd.randint(0, scale // 4 + 1))
            acked = int(scale * (1.0 + 0.3 * math.cos(back / 9)))
            failed = rnd.choice([0, 0, 0, 1, 2]) if scale > 2 else 0
            fields.update(
                {
                    f"m{slot}": minute,
                    f"e{slot}": enq,
                    f"a{slot}": acked,
                    f"f{slot}": failed,
                    f"d{slot}": 0,
                    f"r{slot}": depth,
                    f"t{slot}": acked * 180,
                }
            )
            depth = max(0, depth - enq + acked + failed)
        redis_client.hset(q.engine._keys.stats, mapping=fields)  # type: ignore[arg-type]
        redis_client.hincrby(q.engine._keys.stats, "acked", scale * 60)
        redis_client.hincrby(q.engine._keys.stats, "run_ms", scale * 60 * 180)
    return {"default": default, "emails": emails, "dead": doomed}


def shoot(browser: WebDriver, name: str) -> None:
    """Save a full-page screenshot to docs/images/<name>.png when ZQUEUE_SCREENSHOTS=1."""
    if not SCREENSHOTS:
        return
    IMAGES.mkdir(parents=True, exist_ok=True)
    for _ in range(3):  # grow the window until the whole page fits (at most 2400 px)
        page, inner = browser.execute_script(
            "return [document.documentElement.scrollHeight, window.innerHeight]"
        )
        if inner >= min(page, 2400):
            break
        outer = browser.get_window_size()["height"]
        browser.set_window_size(1280, outer + min(page, 2400) - inner)
    browser.save_screenshot(str(IMAGES / f"{name}.png"))
    browser.set_window_size(1280, 900)


def text_of(browser: WebDriver, css: str) -> str:
    return str(browser.find_element(By.CSS_SELECTOR, css).text)


def test_every_page_and_search_in_a_real_browser(
    project: dict[str, Any],
    admin_login: str,
    browser: WebDriver,
    redis_client: redis.Redis,
) -> None:
    url = admin_login
    data = demo_data(redis_client)
    default: Queue = data["default"]

    # the admin index lists the entry; the sidebar is folded for roomier screenshots
    browser.get(f"{url}/admin/")
    browser.execute_script("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
    assert browser.find_element(By.CSS_SELECTOR, f'a[href="{BASE}"]').text == "Queues"

    # overview: every queue, its counts, and the charts drawn by the browser
    browser.get(f"{url}{BASE}")
    assert browser.title.startswith("Queues")
    rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    assert [r.find_element(By.TAG_NAME, "th").text for r in rows] == [
        "default",
        "emails",
        "reports",
    ]
    cells = rows[0].find_elements(By.TAG_NAME, "td")
    assert cells[0].text == str(default.counts()["ready"])
    charts = browser.find_elements(By.CSS_SELECTOR, "figure.zq-chart svg")
    assert len(charts) == 6 and all(c.size["width"] > 200 for c in charts)
    # the admin's stylesheet applies (header colour from its CSS variables)
    header = browser.find_element(By.ID, "header")
    assert header.value_of_css_property("background-color") not in ("", "rgba(0, 0, 0, 0)")
    shoot(browser, "overview")

    # queue page: rank order, pagination
    rows[0].find_element(By.CSS_SELECTOR, "th a").click()
    WebDriverWait(browser, 10).until(ec.title_contains("Queue default"))
    first = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    assert len(first) == 50
    tags = [r.find_element(By.CSS_SELECTOR, "th a").text for r in first[:5]]
    assert [default.rank(t) for t in tags] == [0, 1, 2, 3, 4]
    if SCREENSHOTS:
        browser.get(f"{url}{BASE}q/default/?per_page=25")
        shoot(browser, "queue")
        browser.back()
    browser.find_element(By.CSS_SELECTOR, "a[rel=next]").click()
    WebDriverWait(browser, 10).until(ec.url_contains("page=2"))
    assert text_of(browser, "#result_list tbody tr td.zq-num") == "50"

    # tabs
    for state, label in (("delayed", "Delayed"), ("leased", "In flight")):
        browser.find_element(By.PARTIAL_LINK_TEXT, label).click()
        WebDriverWait(browser, 10).until(ec.url_contains(f"state={state}"))
        assert browser.find_element(By.CSS_SELECTOR, ".zq-tabs a.current").text.startswith(label)
    assert len(browser.find_elements(By.CSS_SELECTOR, "progress.zq-progress")) == 3
    shoot(browser, "in-flight")

    # search by id from the overview: lands on the job page with its position
    target = tags[3]
    browser.get(f"{url}{BASE}")
    box = browser.find_element(By.ID, "searchbar")
    box.send_keys(target)
    box.submit()
    WebDriverWait(browser, 10).until(ec.url_contains("/job/?id="))
    assert text_of(browser, ".zq-rank") == str(default.rank(target)) == "3"
    assert target in browser.title
    shoot(browser, "job")

    # a dead letter: list, job page with its traceback, requeue from the browser
    emails: Queue = data["emails"]
    browser.get(f"{url}{BASE}q/emails/?state=dead")
    dead_rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    assert len(dead_rows) == 8
    assert "ConnectionRefusedError" in dead_rows[0].find_element(By.CSS_SELECTOR, ".zq-error").text
    shoot(browser, "dead")
    dead_rows[1].find_element(By.CSS_SELECTOR, "th a").click()
    WebDriverWait(browser, 10).until(ec.url_contains("/job/?id="))
    assert "Traceback (most recent call last)" in text_of(browser, "#zq-error")
    assert text_of(browser, ".zq-state") == "DEAD"
    browser.back()
    dead_rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    dead_rows[0].find_element(By.CSS_SELECTOR, "input[name=tags]").click()
    chosen = dead_rows[0].find_element(By.CSS_SELECTOR, "input[name=tags]").get_attribute("value")
    browser.find_element(By.XPATH, "//button[text()='Requeue selected']").click()
    WebDriverWait(browser, 10).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, ".messagelist"))
    )
    assert "1 dead letter requeued." in text_of(browser, ".messagelist")
    assert emails.state(str(chosen)) == "ready"
    assert emails.counts()["dead"] == 7


def test_dark_theme_uses_the_admin_variables(
    project: dict[str, Any], admin_login: str, browser: WebDriver, redis_client: redis.Redis
) -> None:
    demo_data(redis_client)
    browser.get(f"{admin_login}{BASE}")
    light = browser.find_element(By.CSS_SELECTOR, ".zq-grid").value_of_css_property("stroke")
    browser.execute_script("localStorage.setItem('theme', 'dark')")
    browser.refresh()
    try:
        assert browser.execute_script("return document.documentElement.dataset.theme") == "dark"
        body = browser.find_element(By.TAG_NAME, "body").value_of_css_property("background-color")
        assert body == "rgba(18, 18, 18, 1)"  # the admin's --body-bg in dark mode
        dark = browser.find_element(By.CSS_SELECTOR, ".zq-grid").value_of_css_property("stroke")
        assert dark != light  # --hairline-color changed with the theme
        if SCREENSHOTS:
            shoot(browser, "overview-dark")
    finally:
        browser.execute_script("localStorage.removeItem('theme')")
