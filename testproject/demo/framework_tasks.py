"""Tasks written for Django's Tasks framework, run by django_zqueue's ZQueueBackend."""

from __future__ import annotations

from typing import Any

from django_zqueue.tasks.django_tasks.compat import AVAILABLE

if AVAILABLE:
    try:
        from django.tasks import task
    except ImportError:  # Django 5.2: the backport
        from django_tasks import task  # type: ignore[no-redef]

    @task
    def add(a: int, b: int) -> int:
        return a + b

    @task(priority=50, queue_name="emails")
    def shout(text: str) -> str:
        return text.upper()

    @task(takes_context=True)
    def attempt_number(context: Any) -> int:
        return int(context.attempt)

    @task
    def fails(message: str) -> None:
        raise ValueError(message)

    @task(takes_context=True)
    def fails_first(context: Any) -> str:
        if context.attempt < 2:
            raise RuntimeError(f"attempt {context.attempt} fails")
        return "second time lucky"

    @task
    async def async_add(a: int, b: int) -> int:
        return a + b

    @task
    def sleepy(seconds: float) -> str:
        import time

        time.sleep(seconds)
        return "woke"
