"""The tasks tests/test_peer_django_tasks_rq.py uses. django-tasks-rq's tests import a
``tests/tasks.py`` that its sdist does not ship; these are written from the names and
behaviour its tests expect (the same as Django's own tests/tasks/tasks.py)."""

from __future__ import annotations

from typing import Any

from django_zqueue.tasks.django_tasks.compat import AVAILABLE

if AVAILABLE:
    try:
        from django.tasks import task
    except ImportError:  # Django 5.2: the backport
        from django_tasks import task  # type: ignore[no-redef]

    @task
    def noop_task(*args: Any, **kwargs: Any) -> None:
        return None

    @task
    async def noop_task_async(*args: Any, **kwargs: Any) -> None:
        return None

    @task
    def calculate_meaning_of_life() -> int:
        return 42

    @task
    def failing_task_value_error() -> None:
        raise ValueError("This task failed due to ValueError")

    @task
    def failing_task_system_exit() -> None:
        raise SystemExit("This task failed due to SystemExit")

    @task
    def complex_exception() -> None:
        raise ValueError(ValueError("This task failed"))

    @task
    def complex_return_value() -> Any:
        # Return something which isn't JSON serializable.
        return lambda: True

    @task(takes_context=True)
    def get_task_id(context: Any) -> str:
        return str(context.task_result.id)

    @task(takes_context=True)
    def test_context(context: Any, attempt: int) -> None:
        assert context.attempt == attempt
        assert context.task_result.attempts == attempt
