"""On Django 5.2, make ``django.tasks`` an alias of the django-tasks backport, so that
Django 6.1's tests/tasks suite runs against the backport's API (the backport's own
test suite is not on PyPI). The two differ in a few exception names and in their loggers'
names ("django_tasks" for "django.tasks"): both are aliased here."""

from __future__ import annotations

import importlib
import logging
import sys


def install() -> bool:
    try:
        import django.tasks  # noqa: F401

        return False  # Django >= 6.0: nothing to do
    except ImportError:
        pass
    import django_tasks
    from django_tasks import exceptions

    exceptions.InvalidTask = exceptions.InvalidTaskError  # type: ignore[attr-defined]
    exceptions.InvalidTaskBackend = exceptions.InvalidTaskBackendError  # type: ignore[attr-defined]
    sys.modules["django.tasks"] = django_tasks
    for sub in (
        "base",
        "exceptions",
        "signals",
        "backends",
        "backends.base",
        "backends.dummy",
        "backends.immediate",
    ):
        sys.modules[f"django.tasks.{sub}"] = importlib.import_module(f"django_tasks.{sub}")
    # the backport logs to "django_tasks" (and its immediate backend to a child of it),
    # Django to "django.tasks": Django's tests assert on the latter
    from django_tasks import signals
    from django_tasks.backends import immediate

    signals.logger = logging.getLogger("django.tasks")  # type: ignore[attr-defined]
    immediate.logger = logging.getLogger("django.tasks.backends.immediate")  # type: ignore[attr-defined]
    return True
