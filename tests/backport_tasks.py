"""Tasks defined with the django-tasks backport (``django_tasks``), as Wagtail defines
its own: on Django 5.2 the backport is the framework; on Django 6.x, with ``django.tasks``
in Django, a backport task object can still reach ZQueueBackend (declared on a backport
backend, then ``using(backend=...)`` ours), and runs there with the backport's classes."""

from __future__ import annotations

from typing import Any

try:
    from django.conf import settings
    from django.test import override_settings
    from django_tasks import task
    from django_tasks.backends.immediate import ImmediateBackend
except ImportError:  # no backport installed
    pass
else:
    BACKPORT_IMMEDIATE = f"{ImmediateBackend.__module__}.{ImmediateBackend.__qualname__}"

    @task
    def triple(x: int) -> int:
        return 3 * x

    def context_kind(context: Any) -> str:
        return f"{type(context).__module__}.{type(context).__qualname__} {context.attempt}"

    def raises_key_error(key: str) -> None:
        raise KeyError(key)

    # backport Task objects whatever ZQueueBackend's own framework is: declared on the
    # backport's ImmediateBackend (its task_class is the backport's Task)
    with override_settings(TASKS={**settings.TASKS, "bp": {"BACKEND": BACKPORT_IMMEDIATE}}):
        context_kind = task(takes_context=True, backend="bp")(context_kind)  # type: ignore[assignment]
        raises_key_error = task(backend="bp")(raises_key_error)  # type: ignore[assignment]
