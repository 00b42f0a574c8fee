"""Django tasks in a module that is not an installed app (tests is not one)."""

from __future__ import annotations

from django_zqueue.tasks.django_tasks.compat import AVAILABLE

if AVAILABLE:
    from django.conf import settings
    from django.test import override_settings

    try:
        from django.tasks import task

        IMMEDIATE = "django.tasks.backends.immediate.ImmediateBackend"
    except ImportError:  # Django 5.2: the backport
        from django_tasks import task  # type: ignore[no-redef]

        IMMEDIATE = "django_tasks.backends.immediate.ImmediateBackend"

    @task
    def multiply(a: int, b: int) -> int:
        return a * b

    def on_immediate(x: int) -> int:
        return 2 * x

    # declared on another backend (an immediate one), enqueued on ours with using()
    with override_settings(TASKS={**settings.TASKS, "immediate": {"BACKEND": IMMEDIATE}}):
        on_immediate = task(backend="immediate")(on_immediate)  # type: ignore[assignment]
