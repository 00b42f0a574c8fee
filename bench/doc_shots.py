"""The screenshots of the job logs and of the place-in-line widget's phases, for the docs:
a headless Chromium (selenium and ``chromedriver``) on the test project, served here
by a threaded WSGI server on a free loopback port, against the Redis of
``ZQUEUE_REDIS_URL`` under a private key prefix (its keys deleted at the end) and a
throwaway SQLite database.

    python -m bench.doc_shots [--out docs/images]

Writes ``job-log.png`` (the admin's job page: a job whose first attempt failed and
second succeeded, each attempt's lines) and ``position-waiting.png``,
``position-progress.png``, ``position-streaming.png``, ``position-done.png`` (the
widget of testproject's demo page: its place in line, running with progress, the text
the job streams, its end). Each is a screenshot of the element, palette-quantized
(Pillow) so that it stays small; the script says each file's size and fails past
150 KB. Not a test: the browser tests (tests/e2e) check the same pages.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
PREFIX = f"zqshots-{uuid.uuid4().hex[:8]}"
DB_DIR = tempfile.mkdtemp(prefix="zq-shots-db-")
os.environ["ZQUEUE_PREFIX"] = PREFIX
os.environ["DATABASE_URL"] = f"sqlite:///{DB_DIR}/shots.sqlite3"
os.environ["DJANGO_SETTINGS_MODULE"] = "testproject.settings"
sys.path.insert(0, str(ROOT))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.staticfiles.handlers import StaticFilesHandler  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.test import Client, override_settings  # noqa: E402
from PIL import Image  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from django_zqueue import get_queue  # noqa: E402
from django_zqueue.queue import Queue  # noqa: E402
from django_zqueue.tasks import watch  # noqa: E402
from testproject.demo import tasks  # noqa: E402

MAX_BYTES = 150_000
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
    "--window-size=1100,900",
]


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve() -> tuple[ThreadedWSGIServer, str]:
    """The test project on a free loopback port, in a daemon thread; its base URL."""
    server = ThreadedWSGIServer(("127.0.0.1", 0), QuietHandler, allow_reuse_address=False)
    server.set_app(StaticFilesHandler(get_wsgi_application()))
    threading.Thread(target=server.serve_forever, name="shots-http", daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def chromium() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        raise SystemExit("chromium is needed (apt-get install chromium chromium-driver)")
    options.binary_location = binary
    for flag in [*FLAGS, f"--user-data-dir={tempfile.mkdtemp(prefix='zq-shots-chromium-')}"]:
        options.add_argument(flag)
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def save(element: WebElement, path: Path) -> int:
    """``element``'s screenshot, quantized to a 64-colour palette, at ``path``; its size."""
    image = Image.open(io.BytesIO(element.screenshot_as_png)).convert("RGB")
    image.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    size = path.stat().st_size
    print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {size:,} bytes")
    if size > MAX_BYTES:
        raise SystemExit(f"{path.name} is {size:,} bytes, more than {MAX_BYTES:,}")
    return size


def until(browser: webdriver.Chrome, check: Callable[[], bool], what: str) -> None:
    try:
        WebDriverWait(browser, 20).until(lambda _: check())
    except Exception as exc:
        raise SystemExit(f"the page never showed {what}") from exc


def job_with_two_attempts(q: Queue) -> str:
    """A report job whose first attempt failed and whose second succeeded, each with the
    lines it said; its id."""
    job = tasks.sleep.enqueue(1.0)
    now = int(time.time() * 1000)
    said = [
        [
            ("INFO", "Report for March: reading 1,204 orders"),
            ("INFO", "Fetched exchange rates (EUR, USD, GBP)"),
            ("WARNING", "Warehouse API slow: 4.8 s for page 3"),
            ("ERROR", "Warehouse API timed out after 3 tries"),
        ],
        [
            ("INFO", "Report for March: reading 1,204 orders"),
            ("INFO", "Fetched exchange rates (EUR, USD, GBP)"),
            ("INFO", "Warehouse stock read (12 pages)"),
            ("INFO", "Wrote report-2025-03.pdf (38 pages)"),
        ],
    ]
    for attempt, lines in enumerate(said, 1):
        msg = q.get(consumer="shots:1:a")
        assert msg is not None and msg.tag == job.id and msg.attempt == attempt
        q.engine.joblogs.append(  # said now: the page's times agree with the job's
            job.id,
            [(attempt, now + i, level, text) for i, (level, text) in enumerate(lines)],
            max_lines=1000,
            max_line_bytes=2000,
        )
        if attempt == 1:
            q.nack(msg, "TimeoutError: Warehouse API timed out after 3 tries", retry_in=0)
        else:
            q.ack(msg, result={"pages": 38})
    return job.id


def shoot_job_log(browser: webdriver.Chrome, base: str, out: Path) -> None:
    q = get_queue("default")
    tag = job_with_two_attempts(q)
    browser.get(f"{base}/admin/django_zqueue/queue/q/default/job/?id={quote(tag, safe='')}")
    log = browser.find_element(By.ID, "zq-log")
    until(browser, lambda: "Wrote report-2025-03.pdf" in log.text, "the job's log")
    browser.set_window_size(1100, 2000)  # the whole page in view: the element's shot is whole
    save(browser.find_element(By.ID, "content"), out / "job-log.png")
    browser.set_window_size(1100, 900)


def shoot_position(browser: webdriver.Chrome, base: str, out: Path) -> None:
    watch._watches.clear()
    q = get_queue("default")
    ahead = [q.publish({"task": "someone.else", "args": [i]}) for i in range(2)]
    browser.set_window_size(520, 600)
    browser.get(f"{base}/demo/wait/")
    browser.find_element(By.XPATH, "//button[text()='Start a report']").click()
    box = browser.find_element(By.CSS_SELECTOR, "[data-zq-position]")
    page = browser.find_element(By.TAG_NAME, "main")
    until(browser, lambda: box.get_attribute("data-zq-ahead") == "2", "2 jobs ahead")
    save(page, out / "position-waiting.png")
    for _ in ahead:
        msg = q.get(consumer="shots:1:b")
        assert msg is not None and msg.tag in ahead
        q.ack(msg)
    mine = q.get(consumer="shots:1:b")
    assert mine is not None
    q.touch(mine, progress=0.4, note="rendering")
    until(browser, lambda: "40%" in box.text, "the progress")
    save(page, out / "position-progress.png")
    for chunk in ("Reading 1,204 orders…\n", "Rates: EUR, USD, GBP\n", "Rendering page 12 of 38\n"):
        q.engine.jobstreams.append(mine.tag, chunk)
    until(browser, lambda: box.get_attribute("data-zq-chunks") == "3", "the streamed text")
    save(page, out / "position-streaming.png")
    q.ack(mine, result={"pages": 38})
    until(browser, lambda: box.get_attribute("data-zq-status") == "done", "the end")
    save(page, out / "position-done.png")
    browser.set_window_size(1100, 900)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    logging.getLogger("django.server").setLevel(logging.ERROR)
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_superuser("shots", "shots@example.com", "x")
    client = Client()
    client.force_login(user)
    value = {**settings.ZQUEUE, "ENQUEUE_ON_COMMIT": False}
    server, base = serve()
    browser = chromium()
    try:
        with override_settings(ZQUEUE=value):
            get_queue("default").clear()
            browser.get(f"{base}/admin/login/")
            browser.add_cookie({"name": "sessionid", "value": client.cookies["sessionid"].value})
            shoot_job_log(browser, base, a.out)
            shoot_position(browser, base, a.out)
            get_queue("default").clear()
    finally:
        browser.quit()
        server.shutdown()
        shutil.rmtree(DB_DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
