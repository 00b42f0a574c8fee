"""Tasks defined with the django-tasks backport run through ZQueueBackend, on Django 5.2
(where the backport is the framework) and on Django 6.x (where ``django.tasks`` is, and the
backport's objects get the backport's TaskResult, TaskContext, TaskError and signals)."""

from __future__ import annotations

import importlib.util
import logging
from typing import Any

import pytest

from django_zqueue.tasks.django_tasks.compat import (
    FRAMEWORKS,
    InvalidTask,
    TaskResultDoesNotExist,
    task_backends,
)
from django_zqueue.worker import Worker

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("django_tasks") is None, reason="django-tasks is not installed"
)


@pytest.fixture
def bt(project: dict[str, str]) -> Any:
    from tests import backport_tasks

    return backport_tasks


def run_worker() -> None:
    Worker(["default"], burst=True, scanner=False).run()


def test_backport_decorated_task_runs(bt: Any) -> None:
    result = bt.triple.enqueue(5)  # the backport's @task on our backend
    run_worker()
    result.refresh()
    assert result.status.value == "SUCCESSFUL" and result.return_value == 15


def test_backport_task_object_uses_the_backports_classes(bt: Any) -> None:
    import django_tasks
    from django_tasks import signals

    task = bt.context_kind.using(backend="default")
    assert isinstance(task, django_tasks.base.Task)
    finished: list[Any] = []
    signals.task_finished.connect(
        lambda sender, task_result, **kw: finished.append(task_result),
        weak=False,
        dispatch_uid="bp",
    )
    try:
        result = task.enqueue()
        assert isinstance(result, django_tasks.TaskResult)
        run_worker()
    finally:
        signals.task_finished.disconnect(dispatch_uid="bp")
    done = task_backends["default"].get_result(result.id)
    assert isinstance(done, django_tasks.TaskResult) and isinstance(done.task, type(task))
    assert done.return_value == "django_tasks.base.TaskContext 1"
    assert [r.id for r in finished] == [result.id]
    result.refresh()  # the backport's own refresh, through our get_result
    assert result.return_value == done.return_value


def test_backport_task_failure_and_logger(bt: Any, caplog: pytest.LogCaptureFixture) -> None:
    task = bt.raises_key_error.using(backend="default")
    with caplog.at_level(logging.DEBUG, logger="django_tasks"):
        result = task.enqueue("k")
        run_worker()
    result.refresh()
    assert result.status.value == "FAILED" and result.attempts == 1
    assert result.errors[0].exception_class is KeyError
    assert any(result.id in r.getMessage() for r in caplog.records if r.name == "django_tasks")


def test_exceptions_are_both_frameworks(bt: Any) -> None:
    from django_tasks.exceptions import InvalidTaskError
    from django_tasks.exceptions import TaskResultDoesNotExist as BackportMissing

    with pytest.raises(InvalidTaskError):
        bt.triple.using(queue_name="not-a-zqueue-queue").enqueue(1)
    with pytest.raises(BackportMissing):
        task_backends["default"].get_result("nope")
    assert issubclass(InvalidTask, InvalidTaskError)
    assert issubclass(TaskResultDoesNotExist, BackportMissing)
    assert FRAMEWORKS[-1].name == "django_tasks"
