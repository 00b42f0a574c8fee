"""What an operator looks for after the fact, in a real headless Chromium: a job that
finished hours ago found from the Finished tab by one of its argument values in one
search, and an event name mistyped on a durable job's page refused with the names the job
waits for, nothing sent."""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest
import redis

from django_zqueue import get_queue
from django_zqueue.queue import Queue

pytest.importorskip("selenium")
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from ..conftest import snapshot
from ..test_admin_durable import waiting_job
from .test_admin_browser import (  # noqa: F401 - fixtures
    BASE,
    admin_login,
    browser,
    project,
)
from .test_admin_browser import pytestmark as pytestmark
from .test_admin_live import text_of

HOURS_AGO = 3


def finished_jobs(q: Queue, n: int) -> list[str]:
    """``n`` jobs of a receipt task, each acked (so kept in the history), newest last."""
    tags = q.publish_many(
        [
            {"task": "shop.tasks.send_receipt", "args": [9000 + i], "kwargs": {"user_id": 100 + i}}
            for i in range(n)
        ]
    )
    for tag in tags:
        msg = q.get(consumer="web-1:1:a/0")
        assert msg is not None and msg.tag == tag
        assert q.engine.run(q.engine.consume.ack_call(msg, {"sent": True}, 3600, run_ms=12))
    return tags


def ended_hours_ago(client: redis.Redis, q: Queue, tag: str, hours: float) -> int:
    """Move job ``tag``'s end back by ``hours``, as if it had finished then: its score in
    the history's index and the end time at the head of its kept record (``fa``, a
    MessagePack uint64 right after the map header and the key). Returns the new end (ms)."""
    keys = q.engine._keys
    ended = int(client.zscore(keys.finished, tag) or 0) - int(hours * 3600_000)
    kept = client.hget(keys.history, tag)
    assert kept is not None and kept[1:5] == b"\xa2fa\xcf", kept[:8]
    client.hset(keys.history, tag, kept[:5] + struct.pack(">Q", ended) + kept[13:])
    client.zadd(keys.finished, {tag: ended}, xx=True)
    return ended


def test_a_job_finished_hours_ago_is_found_by_an_argument_in_one_search(
    project: dict[str, Any],  # noqa: F811
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
    redis_client: redis.Redis,
) -> None:
    q = get_queue("default")
    tags = finished_jobs(q, 40)
    wanted = tags[7]  # args [9007], user_id 107
    ended = ended_hours_ago(redis_client, q, wanted, HOURS_AGO)
    assert time.time() * 1000 - ended > (HOURS_AGO - 0.1) * 3600_000
    finished_jobs(q, 5)  # and newer ones since

    browser.get(f"{admin_login}{BASE}q/default/?state=finished")
    box = browser.find_element(By.ID, "zq-h-args")
    box.send_keys("user_id:107")
    box.submit()
    WebDriverWait(browser, 10).until(ec.url_contains("args=user_id"))
    found = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr th a")
    assert [a.text for a in found] == [wanted]
    found[0].click()
    WebDriverWait(browser, 10).until(ec.url_contains("/job/?id="))
    assert text_of(browser, ".zq-state") == "SUCCEEDED"
    page = text_of(browser, "#content-main")
    assert "9007" in page and "shop.tasks.send_receipt" in page
    assert f"{HOURS_AGO}\xa0hours" in page or f"{HOURS_AGO} hours" in page, page[:3000]

    # the same value as the JSON holds it, another spacing: the same one job
    browser.get(f"{admin_login}{BASE}q/default/?state=finished")
    box = browser.find_element(By.ID, "zq-h-args")
    box.send_keys('"user_id" :  107')
    box.submit()
    WebDriverWait(browser, 10).until(ec.url_contains("args="))
    found = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr th a")
    assert [a.text for a in found] == [wanted]


def test_a_mistyped_event_is_refused_in_the_browser(
    project: dict[str, Any],  # noqa: F811
    admin_login: str,  # noqa: F811
    browser: WebDriver,  # noqa: F811
    redis_client: redis.Redis,
    prefix: str,
) -> None:
    tag = waiting_job()  # parked in durable.wait_for("approved")
    browser.get(f"{admin_login}{BASE}q/default/job/?id={tag}")
    assert "waiting for event approved" in text_of(browser, "#zq-parked")
    before = snapshot(redis_client, prefix)
    name = browser.find_element(By.CSS_SELECTOR, 'input[name="name"][list="zq-waits"]')
    name.clear()
    name.send_keys("aproved")
    name.submit()
    WebDriverWait(browser, 10).until(
        ec.text_to_be_present_in_element((By.CSS_SELECTOR, "body"), "Nothing sent")
    )
    assert f"Nothing sent: job {tag} waits for approved, not aproved." in text_of(browser, "body")
    assert snapshot(redis_client, prefix) == before
    assert get_queue("default").state(tag) == "delayed"  # still parked
