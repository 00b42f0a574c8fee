"""The Django Tasks backend's settings path: ``TASKS = {"default": {"BACKEND":
"django_zqueue.backends.ZQueueBackend"}}`` (docs/django-tasks.md). The backend lives in
``django_zqueue.tasks.django_tasks.backend``; this module only names it."""

from __future__ import annotations

from .tasks.django_tasks.backend import UnsafeTaskPath, ZQueueBackend, task_rank

__all__ = ["UnsafeTaskPath", "ZQueueBackend", "task_rank"]
