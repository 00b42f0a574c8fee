"""The workers page in a real headless Chromium: an operator quiets, then stops, a real
worker process running a job, from its buttons and their confirmation pages; the
worker's state in Redis, its exit and Django's admin log are checked after each."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry

from django_zqueue import get_queue
from django_zqueue.read.workers import WorkerInfo, read_workers
from testproject.demo import tasks

pytest.importorskip("selenium")
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from ..conftest import redis_url
from .test_admin_browser import (  # noqa: F401 - fixtures
    BASE,
    admin_login,
    browser,
    project,
)
from .test_admin_browser import pytestmark as pytestmark
from .test_schedules_browser import gone

ROOT = Path(__file__).resolve().parent.parent.parent
LIMIT = 60.0


def wait_for(what: Callable[[], Any], why: str) -> Any:
    deadline = time.monotonic() + LIMIT
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"not within {LIMIT:g} s: {why}")


def the_worker() -> WorkerInfo | None:
    found = read_workers([get_queue("default").engine]).workers
    return found[0] if found else None


@pytest.fixture
def worker_process(project: dict[str, Any], tmp_path: Path) -> Iterator[subprocess.Popen[str]]:  # noqa: F811
    env = {
        **os.environ,
        "ZQUEUE_REDIS_URL": redis_url(),
        "ZQUEUE_PREFIX": project["PREFIX"],
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "testproject.settings",
    }
    ledger = tmp_path / "ledger"
    tasks.sleep.enqueue(30.0, str(ledger), "a")
    args = ["zqueue_worker", "--queues", "default", "--no-scanner", "--grace", "1"]
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "testproject" / "manage.py"), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(lambda: ledger.exists() and "start a" in ledger.read_text(), "the job started")
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def order(browser: WebDriver, worker: str, op: str) -> None:  # noqa: F811
    """Press ``op`` on ``worker``'s box, check its confirmation page, confirm, and wait
    for the workers page the POST answers with."""
    form = browser.find_element(By.CSS_SELECTOR, f'form.zq-worker-ctl[data-worker="{worker}"]')
    before = browser.find_element(By.TAG_NAME, "html")
    form.find_element(By.CSS_SELECTOR, f'button[value="{op}"]').click()
    WebDriverWait(browser, 10).until(lambda _b: gone(before))
    said = browser.find_element(By.CSS_SELECTOR, "#content-main p").text
    assert f"Worker {worker} will claim no more jobs" in said
    assert ("stays idle" if op == "quiet" else "then exit") in said
    before = browser.find_element(By.TAG_NAME, "html")
    browser.find_element(By.CSS_SELECTOR, "#content-main input[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda _b: gone(before))
    WebDriverWait(browser, 10).until(
        lambda b: b.find_elements(By.CSS_SELECTOR, ".messagelist li.success")
    )


def test_quiet_then_stop_a_running_worker_from_the_browser(
    worker_process: subprocess.Popen[str],
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
) -> None:
    worker = wait_for(the_worker, "the worker registered")
    browser.get(f"{admin_login}{BASE}workers/")
    box = browser.find_element(By.CSS_SELECTOR, ".zq-worker caption").text
    assert worker.id.lower() in box.lower() and "running" in box.lower()  # (shown uppercase)
    held = browser.find_element(By.CSS_SELECTOR, ".zq-held tbody tr").text
    assert "testproject.demo.tasks.sleep" in held

    order(browser, worker.id, "quiet")
    wait_for(lambda: (w := the_worker()) and w.state == "quiet", "the worker said quiet")
    assert worker_process.poll() is None  # quiet: still there, its job still running
    browser.get(f"{admin_login}{BASE}workers/")
    assert "quiet" in browser.find_element(By.CSS_SELECTOR, ".zq-worker caption").text.lower()

    order(browser, worker.id, "stop")
    assert worker_process.wait(timeout=LIMIT) == 0
    logged = [
        (e.user.username, e.object_id, e.change_message) for e in LogEntry.objects.order_by("pk")
    ]
    assert logged == [
        ("admin", "default", f"quiet: worker {worker.id}, 1 job running"),
        ("admin", "default", f"stop: worker {worker.id}, 1 job running"),
    ]
    # the job cut off at the end of the grace period is given back, not lost
    q = get_queue("default")
    assert q.counts()["ready"] + q.counts()["inflight"] == 1
