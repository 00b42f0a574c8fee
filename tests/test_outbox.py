"""The transactional outbox (``ZQUEUE["OUTBOX"] = True``): a job enqueued inside
``transaction.atomic`` is a row of the same transaction, published by the relay of the
scanner; no job lost when Redis is down at commit, none published twice, in order.

ORM tests (``-m orm``): CI runs them on SQLite and on PostgreSQL (DATABASE_URL).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import override_settings

from django_zqueue import conf, get_queue, outbox
from django_zqueue.engine.records.spec import JobSpec
from django_zqueue.exceptions import QueueUnavailable
from django_zqueue.models import OutboxEntry
from django_zqueue.queue import NewJob
from django_zqueue.worker import Worker
from django_zqueue.worker.scanner import Scanner
from testproject.demo import tasks

from .redis_private import PrivateRedis
from .redis_server import redis_url

pytestmark = [pytest.mark.orm, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def settings_on(prefix: str) -> Iterator[dict[str, Any]]:
    value = {
        "REDIS_URL": redis_url(),
        "PREFIX": prefix,
        "QUEUES": {"default": {}, "other": {}},
        "OUTBOX": True,
    }
    with override_settings(ZQUEUE=value):
        yield value
    conf.reset()


def rows() -> list[OutboxEntry]:
    return list(OutboxEntry.objects.order_by("id"))


def ready_args(queue: str = "default") -> list[list[Any]]:
    """The arguments of the queue's ready jobs, in the order they would be claimed."""
    q = get_queue(queue)
    out = []
    for tag, _, _ in q.read.page("ready", 0, 1000):
        info = q.info(tag)
        assert info is not None
        out.append(info.body["args"])
    return out


# ------------------------------------------------------------------ writing rows


def test_enqueue_in_a_transaction_writes_a_row_not_a_job(settings_on: dict[str, Any]) -> None:
    q = get_queue("default")
    with transaction.atomic():
        job = tasks.add.enqueue(1, 2)
        assert [(r.queue, r.tag, r.task) for r in rows()] == [
            ("default", job.id, "testproject.demo.tasks.add")
        ]
    assert q.total_count() == 0  # committed, not yet published
    (row,) = rows()
    sent = row.job()
    assert isinstance(sent, NewJob)
    assert json.loads(sent.body) == {
        "task": "testproject.demo.tasks.add",
        "args": [1, 2],
        "kwargs": {},
    }
    assert sent.spec.priority == 0 and sent.spec.delay_ms is None

    done = outbox.relay()
    assert (done.published, done.duplicates, done.failed) == (1, 0, 0)
    assert rows() == []
    assert job.status() == "ready"
    assert q.stats()["relayed"] == 1
    Worker(["default"], burst=True).run()
    assert job.result() == 3


def test_a_rollback_leaves_nothing(settings_on: dict[str, Any]) -> None:
    def enqueue_then_fail() -> None:
        with transaction.atomic():
            tasks.add.enqueue(1, 2)
            raise RuntimeError

    with pytest.raises(RuntimeError):
        enqueue_then_fail()
    assert rows() == []
    assert outbox.relay().rows == 0
    assert get_queue("default").total_count() == 0


def test_outside_a_transaction_and_with_on_commit_off_jobs_are_published_at_once(
    settings_on: dict[str, Any],
) -> None:
    job = tasks.add.enqueue(1, 2)
    with transaction.atomic():
        now = tasks.add.using(on_commit=False).enqueue(3, 4)
        assert now.status() == "ready"
    assert job.status() == "ready"
    assert rows() == []


def test_enqueue_many_in_at_and_options_go_through_the_outbox(
    settings_on: dict[str, Any],
) -> None:
    with transaction.atomic():
        many = tasks.add.enqueue_many([(1, 2), (3, 4)])
        later = tasks.add.using(priority=7, max_retries=4).enqueue_in(3600, 5, 6)
        other = tasks.add.using(queue="other").enqueue(7, 8)
    assert [r.tag for r in rows()] == [*(j.id for j in many), later.id, other.id]
    assert outbox.relay().published == 4
    assert [j.status() for j in many] == ["ready", "ready"]
    info = get_queue("default").info(later.id)
    assert info is not None and info.state == "delayed"
    assert info.priority == 7 and info.max_retries == 4
    assert other.status() == "ready" and get_queue("other").total_count() == 1


def test_a_delay_counts_from_the_write() -> None:
    row = outbox.row_of("default", "t", NewJob("a", b"{}", JobSpec(delay_ms=60_000)))
    assert row.job(row.created_at + timedelta(seconds=20)).spec.delay_ms == 40_000
    assert row.job(row.created_at + timedelta(seconds=61)).spec.delay_ms is None  # due: now


def test_an_expiry_counts_from_the_write_and_every_option_survives() -> None:
    spec = JobSpec(priority=3, max_retries=2, group="g", weight=2.0, expires_in_ms=60_000)
    row = outbox.row_of("default", "t", NewJob("a", b"{}", spec))
    later = row.job(row.created_at + timedelta(seconds=20))
    assert later.spec == replace(spec, expires_in_ms=40_000)
    assert later.spec.packed == replace(spec, expires_in_ms=40_000).packed
    # past its expiry while the row waited: it expires at once when published
    assert row.job(row.created_at + timedelta(seconds=90)).spec.expires_in_ms == 1


def test_the_outbox_setting_must_be_a_bool() -> None:
    config, problems = conf.parse({"OUTBOX": "yes"})
    assert [(p.id, p.msg, p.hint) for p in problems] == [
        ("django_zqueue.E010", "ZQUEUE['OUTBOX'] must be True or False.", "Default: False.")
    ]
    assert config.outbox is False
    assert conf.parse({})[0].outbox is False
    assert conf.parse({"OUTBOX": True})[0].outbox is True


def test_with_the_outbox_off_nothing_is_written_nor_read(zqueue_settings: dict[str, Any]) -> None:
    with transaction.atomic():
        job = tasks.add.enqueue(1, 2)
    assert rows() == [] and job.status() == "ready"
    assert Scanner([get_queue("default")]).relay() == 0


# ------------------------------------------------------------------ relaying


def test_a_replayed_row_is_not_published_twice(settings_on: dict[str, Any]) -> None:
    """The relay died between its publish and the commit of its delete: the row's tag
    is in the queue already, and the replay deletes the row without a second job."""
    with transaction.atomic():
        first = tasks.add.enqueue(1, 2)
        second = tasks.add.enqueue(3, 4)
    q = get_queue("default")
    q.publish_prepared([rows()[0].job()])  # what the crashed relay had sent
    done = outbox.relay()
    assert (done.published, done.duplicates) == (1, 1)
    assert rows() == []
    assert q.total_count() == 2
    assert sorted(ready_args()) == [[1, 2], [3, 4]]
    assert first.status() == second.status() == "ready"
    done = outbox.relay()  # nothing left
    assert done.rows == 0 and q.total_count() == 2


def test_rows_are_published_in_order(settings_on: dict[str, Any]) -> None:
    """Rows of several transactions, of two queues, more than one batch: each queue's
    jobs are in line in the order of the rows (FIFO within a priority)."""
    n = 0
    for _ in range(5):
        with transaction.atomic():
            for _ in range(50):
                tasks.add.using(queue="default" if n % 3 else "other").enqueue(n, 0)
                n += 1
    assert len(rows()) == 250
    done = outbox.relay(batch=40)
    assert done.published == 250 and rows() == []
    assert ready_args("default") == [[i, 0] for i in range(250) if i % 3]
    assert ready_args("other") == [[i, 0] for i in range(250) if not i % 3]


def test_a_step_takes_a_bounded_number_of_batches(settings_on: dict[str, Any]) -> None:
    with transaction.atomic():
        tasks.add.enqueue_many([(i, 0) for i in range(25)])
    assert outbox.relay(batch=10, max_batches=2).published == 20
    assert len(rows()) == 5
    assert outbox.relay(batch=10, max_batches=2).published == 5


def test_a_row_that_cannot_be_published_is_set_aside(
    settings_on: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    with transaction.atomic():
        tasks.add.enqueue(1, 2)
        tasks.add.using(queue="other").enqueue(3, 4)
        tasks.add.enqueue(5, 6)
    with override_settings(ZQUEUE={**settings_on, "QUEUES": {"default": {}}}):
        done = outbox.relay()
        assert (done.published, done.failed) == (2, 1)
        (left,) = rows()
        assert left.queue == "other"
        assert left.last_error.startswith("UnknownQueue: ")
        assert "event=outbox_row_failed queue=other" in caplog.text
        assert outbox.relay().rows == 0  # passed over from then on
    assert outbox.waiting() == 1
    assert ready_args() == [[1, 2], [5, 6]]


def test_once_rules_go_through_the_outbox(settings_on: dict[str, Any]) -> None:
    with transaction.atomic():
        job = tasks.add.using(tag="order-1", unique_for=60).enqueue(1, 2)
    (row,) = rows()
    assert row.unique_for == 60.0
    assert outbox.relay().published == 1
    assert job.status() == "ready"


def test_a_scanner_step_relays(settings_on: dict[str, Any]) -> None:
    with transaction.atomic():
        job = tasks.add.enqueue(1, 2)
    scanner = Scanner([get_queue("default")])
    totals = scanner.step()
    assert totals.relayed == 1 and totals.busy
    assert job.status() == "ready" and scanner.relayed == 1


def test_a_running_worker_publishes_a_committed_job(settings_on: dict[str, Any]) -> None:
    """The heartbeat relays between scans: the job is run without a burst's first scan."""
    w = Worker(["default"], scan_interval=3600)
    scanner = w.embedded_scanner()
    thread = threading.Thread(target=w.run, daemon=True)
    thread.start()
    try:
        for _ in range(600):  # the first scan step is done: the next is an hour away
            if scanner.steps:
                break
            time.sleep(0.05)
        assert scanner.steps == 1
        with transaction.atomic():
            job = tasks.add.enqueue(1, 2)
        assert job.wait(timeout=30) == 3
        assert scanner.steps == 1 and scanner.relayed == 1  # by relay_tick, not a step
    finally:
        w.stop()
        thread.join(30)
    assert rows() == []


@pytest.mark.skipif(
    not connection.features.has_select_for_update_skip_locked,
    reason="the database cannot skip locked rows (SQLite): the tag dedups instead",
)
def test_a_second_relay_takes_nothing_while_the_first_holds_the_oldest_rows(
    settings_on: dict[str, Any],
) -> None:
    with transaction.atomic():
        tasks.add.enqueue_many([(i, 0) for i in range(3)])
    held = threading.Event()
    release = threading.Event()
    taken: list[int] = []

    def first_relay() -> None:
        try:
            with transaction.atomic():
                taken.extend(r.id for r in outbox.take("default", 2))
                held.set()
                release.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=first_relay)
    thread.start()
    try:
        assert held.wait(30)
        assert len(taken) == 2
        with transaction.atomic():
            assert outbox.take("default", 100) == []  # the third row waits its turn
        assert outbox.relay_batch("default").rows == 0
    finally:
        release.set()
        thread.join(30)
    assert outbox.relay().published == 3


# ------------------------------------------------------------------ Redis down at commit


def test_a_job_committed_while_redis_is_down_runs_when_it_is_back(
    tmp_path: Path, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = PrivateRedis(tmp_path / "redis")
    value = {
        "REDIS_URL": server.url,
        "PREFIX": prefix,
        "QUEUES": {"default": {}},
        "OUTBOX": True,
        "SOCKET_CONNECT_TIMEOUT": 1,
        "SOCKET_TIMEOUT": 1,
    }
    try:
        with override_settings(ZQUEUE=value):
            server.kill()
            with transaction.atomic():
                job = tasks.add.enqueue(20, 22)
            assert [r.tag for r in rows()] == [job.id]  # committed; no error anywhere
            assert "publish_after_commit_failed" not in caplog.text
            with pytest.raises(QueueUnavailable):
                outbox.relay()
            scanner = Scanner([get_queue("default")])
            assert scanner.relay_tick() > 0  # never raises: backs off
            assert [r.tag for r in rows()] == [job.id]  # still waiting
            server.start()
            Worker(["default"], burst=True).run()  # its first scan relays
            assert rows() == []
            assert job.result() == 42
    finally:
        server.stop()
        conf.reset()


# ------------------------------------------------------------------ admin and metrics


def test_the_admin_lists_the_rows_waiting_read_only(settings_on: dict[str, Any]) -> None:
    from django.contrib.auth.models import Permission, User
    from django.test import Client

    with transaction.atomic():
        job = tasks.add.enqueue(1, 2)
    user = User.objects.create_user("ops", "ops@example.com", "pw", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="django_zqueue", codename="view_outboxentry")
    )
    client = Client()
    client.force_login(user)
    page = client.get("/admin/django_zqueue/outboxentry/")
    assert page.status_code == 200
    assert job.id in page.content.decode()
    (row,) = rows()
    detail = client.get(f"/admin/django_zqueue/outboxentry/{row.id}/change/")
    assert detail.status_code == 200
    assert "&quot;args&quot;:[1,2]" not in detail.content.decode()  # no view_payload
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="django_zqueue", codename="view_payload")
    )
    user = User.objects.get(pk=user.pk)  # its permissions read again
    client.force_login(user)
    detail = client.get(f"/admin/django_zqueue/outboxentry/{row.id}/change/")
    assert "&quot;args&quot;:[1,2]" in detail.content.decode()
    assert client.get("/admin/django_zqueue/outboxentry/add/").status_code == 403
    assert client.post(f"/admin/django_zqueue/outboxentry/{row.id}/delete/").status_code == 403
    assert rows() == [row]


def test_the_admin_retries_and_discards_rows_after_a_confirmation_and_logs_it(
    settings_on: dict[str, Any],
) -> None:
    from django.contrib.admin.models import DELETION, LogEntry
    from django.contrib.auth.models import Permission, User
    from django.test import Client

    url = "/admin/django_zqueue/outboxentry/"
    with transaction.atomic():
        tasks.add.using(queue="other").enqueue(1, 1)
        tasks.add.using(queue="other").enqueue(2, 2)
        tasks.add.using(queue="other").enqueue(3, 3)
    with override_settings(ZQUEUE={**settings_on, "QUEUES": {"default": {}}}):
        assert outbox.relay().failed == 3  # "other" unknown: all set aside
    first, second, third = rows()
    assert all(r.last_error.startswith("UnknownQueue: ") for r in (first, second, third))

    def user(name: str, *codenames: str) -> Client:
        u = User.objects.create_user(name, f"{name}@example.com", "pw", is_staff=True)
        for code in codenames:
            u.user_permissions.add(
                Permission.objects.get(content_type__app_label="django_zqueue", codename=code)
            )
        c = Client()
        c.force_login(u)
        return c

    viewer = user("viewer", "view_outboxentry")
    assert "Retry the selected rows" not in viewer.get(url).content.decode()
    r = viewer.post(url, {"action": "retry", "_selected_action": [first.id], "confirm": "yes"})
    assert rows()[0].last_error != ""  # not offered: nothing done
    op = user("op", "view_outboxentry", "manage_jobs")
    assert "Retry the selected rows" in op.get(url).content.decode()
    r = op.post(url, {"action": "retry", "_selected_action": [first.id, second.id]})
    assert r.status_code == 200 and "next relay step publishes them" in r.content.decode()
    assert all(x.last_error for x in rows())  # a confirmation first: nothing changed
    r = op.post(
        url, {"action": "retry", "_selected_action": [first.id, second.id], "confirm": "yes"}
    )
    assert r.status_code == 302
    assert [bool(x.last_error) for x in rows()] == [False, False, True]
    assert outbox.relay().published == 2  # the queue is back: published, in order
    assert ready_args("other") == [[1, 1], [2, 2]]
    r = op.post(url, {"action": "discard", "_selected_action": [third.id]})
    assert r.status_code == 200 and "never published" in r.content.decode()
    assert len(rows()) == 1
    op.post(url, {"action": "discard", "_selected_action": [third.id], "confirm": "yes"})
    assert rows() == []
    logged = [
        (e.user.username, e.object_id, e.action_flag == DELETION, e.change_message)
        for e in LogEntry.objects.order_by("pk")
    ]
    assert logged == [
        ("op", "other", False, "outbox_retry: 2 rows"),
        ("op", "other", True, "outbox_discard: 1 row"),
    ]


def test_metrics_count_the_rows_waiting_and_relayed(settings_on: dict[str, Any]) -> None:
    pytest.importorskip("prometheus_client")
    from django_zqueue.metrics import exposition

    with transaction.atomic():
        tasks.add.enqueue_many([(1, 2), (3, 4)])
    text = exposition([get_queue("default")]).decode()
    assert "zqueue_outbox_waiting 2.0" in text
    outbox.relay()
    text = exposition([get_queue("default")]).decode()
    assert "zqueue_outbox_waiting 0.0" in text
    assert 'zqueue_jobs_relayed_total{queue="default"} 2.0' in text
