"""ZQueueBackend: Django's Tasks framework on django_zqueue queues and workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import SuspiciousOperation
from django.test import override_settings
from django.utils import timezone

from django_zqueue import get_queue
from django_zqueue.backends import UnsafeTaskPath, ZQueueBackend, task_rank
from django_zqueue.tasks.django_tasks.compat import (
    AVAILABLE,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
    task_enqueued,
    task_finished,
    task_started,
)
from django_zqueue.worker import Worker

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="no django.tasks and no django-tasks")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def ft(project: dict[str, str]) -> Any:
    from testproject.demo import framework_tasks

    return framework_tasks


def run_worker(*queues: str) -> Worker:
    w = Worker(list(queues or ["default", "emails"]), burst=True, scan_interval=0.05)
    w.run()
    return w


def test_construction_is_cheap_and_truthful() -> None:
    backend = ZQueueBackend("x", {"QUEUES": ["default"], "OPTIONS": {}})
    assert backend.supports_defer and backend.supports_get_result
    assert backend.supports_priority and backend.supports_async_task
    assert backend.result_ttl == 86400


def test_check_reports_bad_options() -> None:
    backend = ZQueueBackend(
        "x", {"QUEUES": ["default", "nope"], "OPTIONS": {"RESULT_TTL": 0, "COLOUR": "red"}}
    )
    ids = {m.id for m in backend.check()}
    assert {"django_zqueue.E101", "django_zqueue.E102", "django_zqueue.E104"} <= ids


def test_enqueue_returns_ready_result_and_sends_signal(ft: Any) -> None:
    seen: list[Any] = []
    task_enqueued.connect(
        lambda sender, task_result, **kw: seen.append(task_result), weak=False, dispatch_uid="e"
    )
    try:
        result = ft.add.enqueue(2, 3)
    finally:
        task_enqueued.disconnect(dispatch_uid="e")
    assert result.status == TaskResultStatus.READY
    assert result.enqueued_at is not None and result.enqueued_at.tzinfo is not None
    assert result.errors == [] and result.worker_ids == []
    assert seen == [result]
    fetched = ft.add.get_result(result.id)
    assert fetched.status == TaskResultStatus.READY
    assert fetched.enqueued_at == result.enqueued_at  # microseconds kept
    assert fetched.args == [2, 3] and fetched.task.func is ft.add.func


def test_run_and_get_result(ft: Any) -> None:
    result = ft.add.enqueue(2, 3)
    run_worker()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5
    assert result.started_at is not None and result.finished_at is not None
    assert result.last_attempted_at is not None and len(result.worker_ids) == 1
    assert result.started_at <= result.finished_at


def test_priority_order_and_rank(ft: Any) -> None:
    low = ft.add.using(priority=-10).enqueue(1, 1)
    mid = ft.add.enqueue(1, 2)
    high = ft.add.using(priority=100).enqueue(1, 3)
    assert [task_rank(r)[0] for r in (high, mid, low)] == [0, 1, 2]
    assert task_rank(high.id)[1] is not None
    order: list[str] = []
    task_started.connect(
        lambda sender, task_result, **kw: order.append(task_result.id), weak=False, dispatch_uid="o"
    )
    try:
        run_worker()
    finally:
        task_started.disconnect(dispatch_uid="o")
    assert order == [high.id, mid.id, low.id]
    assert task_rank(high) == (None, None)


def test_run_after_is_deferred(ft: Any) -> None:
    later = ft.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(1, 1)
    info = get_queue("default").info(later.id)
    assert info is not None and info.state == "delayed"
    run_worker()
    assert ft.add.get_result(later.id).status == TaskResultStatus.READY


def test_queue_name_routes_to_the_zqueue_queue(ft: Any) -> None:
    result = ft.shout.enqueue("hi")
    assert get_queue("emails").state(result.id) == "ready"
    run_worker("emails")
    assert ft.shout.get_result(result.id).return_value == "HI"


def make_due(q: Any) -> None:
    """Each retry waits in delayed: make it due."""
    for tag in q.engine._client.zrange(q.engine._keys.delayed, 0, -1):
        q.engine._client.zadd(q.engine._keys.delayed, {tag: 0}, xx=True)


def with_options(**options: Any) -> Any:
    from django.conf import settings

    default = settings.TASKS["default"]
    return override_settings(
        TASKS={"default": {**default, "OPTIONS": {**default.get("OPTIONS", {}), **options}}}
    )


def test_a_raising_task_fails_after_one_attempt_by_default(ft: Any) -> None:
    finished: list[Any] = []
    task_finished.connect(
        lambda sender, task_result, **kw: finished.append(task_result), weak=False, dispatch_uid="f"
    )
    try:
        result = ft.fails.enqueue("boom")
        run_worker()
    finally:
        task_finished.disconnect(dispatch_uid="f")
    result.refresh()
    assert result.status == TaskResultStatus.FAILED  # Django's semantics: no retry
    assert len(result.errors) == 1 and result.attempts == 1
    assert result.errors[0].exception_class is ValueError
    assert [r.status for r in finished] == [TaskResultStatus.FAILED]
    info = get_queue("default").info(result.id)
    assert info is not None and info.state == "dead"


def test_failure_records_errors_and_retries_when_opted_in(ft: Any) -> None:
    finished: list[Any] = []
    task_finished.connect(
        lambda sender, task_result, **kw: finished.append(task_result), weak=False, dispatch_uid="f"
    )
    try:
        with with_options(MAX_RETRIES=3, RETRY_BACKOFF={"base": 60, "max": 60, "jitter": 0}):
            result = ft.fails.enqueue("boom")
            q = get_queue("default")
            run_worker()
            # the backend's backoff, not the queue's (base 1 s)
            score = q.engine._client.zscore(q.engine._keys.delayed, result.id)
            assert score is not None and score / 1000 - time.time() > 50
            for _ in range(3):
                make_due(q)
                run_worker()
    finally:
        task_finished.disconnect(dispatch_uid="f")
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert len(result.errors) == 4 and len(result.worker_ids) == 4
    assert result.errors[0].exception_class_path == "builtins.ValueError"
    assert result.errors[0].exception_class is ValueError
    assert "boom" in result.errors[-1].traceback
    assert result.finished_at is not None
    with pytest.raises(ValueError, match="failed"):
        result.return_value  # noqa: B018
    assert [r.status for r in finished] == [TaskResultStatus.FAILED]


def test_context_attempt_and_retry(ft: Any) -> None:
    with with_options(MAX_RETRIES=1):
        result = ft.fails_first.enqueue()
        q = get_queue("default")
        run_worker()
        mid = ft.fails_first.get_result(result.id)
        assert mid.status == TaskResultStatus.READY and len(mid.errors) == 1
        make_due(q)
        run_worker()
        done = ft.fails_first.get_result(result.id)
        assert done.status == TaskResultStatus.SUCCESSFUL
        assert done.return_value == "second time lucky" and done.attempts == 2
        ctx = ft.attempt_number.enqueue()
        run_worker()
        assert ft.attempt_number.get_result(ctx.id).return_value == 1


def test_async_task(ft: Any) -> None:
    result = ft.async_add.enqueue(4, 5)
    run_worker()
    assert ft.async_add.get_result(result.id).return_value == 9


def test_unknown_id(ft: Any) -> None:
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result("nope")


def test_result_expires(ft: Any, project: dict[str, str]) -> None:
    result = ft.add.enqueue(1, 1)
    run_worker()
    q = get_queue("default")
    assert 0 < q.engine._client.pttl(q.engine._keys.result(result.id)) <= 3600 * 1000  # RESULT_TTL


def test_payload_of_a_non_task_is_not_run(project: dict[str, str]) -> None:
    q = get_queue("default")
    tag = q.publish({"task": "os.system", "django_task": {"backend": "default"}, "args": ["true"]})
    run_worker()
    info = q.info(tag)
    assert info is not None and info.state == "dead"
    assert "not a Task of django.tasks or django_tasks" in (info.last_error or "")
    # get_result applies the same rule: nothing is built from a path that is not a Task
    with pytest.raises(UnsafeTaskPath, match="not a Task") as caught:
        task_backends["default"].get_result(tag)
    assert isinstance(caught.value, TaskResultDoesNotExist | SuspiciousOperation)


def test_get_result_does_not_trust_the_stored_path(project: dict[str, str]) -> None:
    q = get_queue("default")
    body = {"task": "subprocess.check_output", "django_task": {"backend": "default"}}
    tag = q.publish({**body, "args": [["true"]]})
    with pytest.raises(UnsafeTaskPath, match=r"subprocess\.check_output"):
        task_backends["default"].get_result(tag)


def test_refused_job_records_why(ft: Any) -> None:
    """A Task enqueued under an alias that no longer exists: FAILED, errors say why."""
    from django_zqueue.tasks.django_tasks.backend import MARKER

    result = ft.add.enqueue(1, 2)
    q = get_queue("default")
    body = q.info(result.id).body  # type: ignore[union-attr]
    q.delete(result.id)
    tag = q.publish({**body, MARKER: {**body[MARKER], "backend": "gone"}})
    run_worker()
    refused = task_backends["default"].get_result(tag)
    assert refused.status == TaskResultStatus.FAILED
    assert len(refused.errors) == 1
    assert "'gone' is not in TASKS" in refused.errors[0].traceback
    assert issubclass(refused.errors[0].exception_class, Exception)


def test_installed_app_is_not_required_and_task_modules_narrows(project: dict[str, str]) -> None:
    from tests import outside_tasks

    result = outside_tasks.multiply.enqueue(6, 7)  # tests.* is not an installed app
    run_worker()
    assert outside_tasks.multiply.get_result(result.id).return_value == 42
    with with_options(TASK_MODULES=["testproject"]):
        result = outside_tasks.multiply.enqueue(6, 7)
        run_worker()
        with pytest.raises(UnsafeTaskPath):  # the same rule: not imported
            task_backends["default"].get_result(result.id)
    refused = task_backends["default"].get_result(result.id)
    assert refused.status == TaskResultStatus.FAILED
    assert "not within TASKS['default']['OPTIONS']['TASK_MODULES']" in refused.errors[0].traceback


def test_the_alias_used_at_enqueue_travels_with_the_job(project: dict[str, str]) -> None:
    """A task declared on another backend, enqueued with ``using(backend=...)`` on ours:
    the worker runs it, with that alias's RESULT_TTL."""
    from django.conf import settings

    from tests import outside_tasks

    tasks = {
        **settings.TASKS,
        "zq": {**settings.TASKS["default"], "OPTIONS": {"RESULT_TTL": 77}},
    }
    with override_settings(TASKS=tasks):
        result = outside_tasks.on_immediate.using(backend="zq").enqueue(2)
        assert result.backend == "zq"
        run_worker()
        done = task_backends["zq"].get_result(result.id)
        assert done.status == TaskResultStatus.SUCCESSFUL and done.return_value == 4
        assert done.backend == "zq" and done.task.backend == "zq"
        q = get_queue("default")
        assert 0 < q.engine._client.pttl(q.engine._keys.result(result.id)) <= 77_000


def test_check_reports_bad_retry_options() -> None:
    backend = ZQueueBackend(
        "x",
        {
            "QUEUES": ["default"],
            "OPTIONS": {"MAX_RETRIES": -1, "RETRY_BACKOFF": {"base": -1}, "TASK_MODULES": "x"},
        },
    )
    ids = {m.id for m in backend.check()}
    assert {"django_zqueue.E105", "django_zqueue.E106", "django_zqueue.E107"} <= ids
    assert backend.max_retries == 0 and backend.retry_backoff is None
    assert backend.task_modules is None


@pytest.mark.orm
@pytest.mark.django_db(transaction=True)
def test_enqueue_is_immediate_in_a_transaction_unless_configured(ft: Any) -> None:
    from django.conf import settings
    from django.db import transaction

    q = get_queue("default")
    with transaction.atomic():
        ft.add.enqueue(1, 1)
        assert q.total_count() == 1  # Django's framework: immediate by default
    tasks_setting = {
        "default": {**settings.TASKS["default"], "OPTIONS": {"ENQUEUE_ON_COMMIT": True}}
    }
    with override_settings(TASKS=tasks_setting):
        with transaction.atomic():
            ft.add.enqueue(2, 2)
            assert q.total_count() == 1
        assert q.total_count() == 2


@pytest.mark.slow
def test_killed_worker_task_is_recovered(ft: Any, project: dict[str, str]) -> None:
    q = get_queue("default")
    result = ft.sleepy.enqueue(2.0)
    # let the worker claim and start it, kill the worker, then expire the lease as time would
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "testproject/manage.py"), "zqueue_worker", "-v", "0"],
        env=project,
    )
    deadline = time.monotonic() + 15
    while True:  # running, and its worker id recorded (the record is written before the run)
        seen = ft.sleepy.get_result(result.id)
        if seen.status == TaskResultStatus.RUNNING and seen.worker_ids:
            break
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(5)
    q.engine._client.zadd(q.engine._keys.leased, {result.id: 0}, xx=True)
    run_worker("default")
    done = ft.sleepy.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL and done.return_value == "woke"
    assert len(done.worker_ids) == 2  # the killed attempt shows


def test_an_outage_recording_the_start_costs_no_attempt(
    ft: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's record is written before the task is called: an outage there gives the
    job back unrun (Django's default is a single attempt: a nack would fail it)."""
    from django_zqueue.exceptions import QueueUnavailable
    from django_zqueue.tasks.django_tasks import backend as backends

    real, calls = backends.start_record, []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise QueueUnavailable("Redis is unavailable: Connection refused")
        return real(*args, **kwargs)

    monkeypatch.setattr(backends, "start_record", flaky)
    result = ft.add.enqueue(2, 3)
    for _ in range(3):
        if not run_worker().processed:
            break
    assert len(calls) == 2
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 5
    assert len(result.worker_ids) == 1 and not result.errors
