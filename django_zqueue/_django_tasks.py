"""Django's Tasks framework: ``django.tasks`` (Django >= 6.0) or the ``django-tasks``
backport (Django 5.2). One import place, so the rest of the package needs no branches.

Type checking always sees ``django.tasks`` (django-stubs describes it); at run time the
backport stands in for it on Django 5.2, with the same names and shapes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from django.tasks import (
        DEFAULT_TASK_QUEUE_NAME,
        Task,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        task_backends,
    )
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import TaskError
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    AnyTask: TypeAlias = Task[..., Any]
    AnyResult: TypeAlias = TaskResult[..., Any]
    AVAILABLE: bool
else:
    AnyTask = AnyResult = Any  # names for annotations only
    try:  # Django >= 6.0
        from django.tasks import (
            DEFAULT_TASK_QUEUE_NAME,
            Task,
            TaskContext,
            TaskResult,
            TaskResultStatus,
            task_backends,
        )
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import TaskError
        from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
        from django.tasks.signals import task_enqueued, task_finished, task_started
        from django.utils.json import normalize_json

        AVAILABLE = True
    except ImportError:
        try:  # Django 5.2 with the backport
            from django_tasks import (
                DEFAULT_TASK_QUEUE_NAME,
                TaskContext,
                TaskResult,
                TaskResultStatus,
                task_backends,
            )
            from django_tasks.backends.base import BaseTaskBackend
            from django_tasks.base import Task, TaskError
            from django_tasks.exceptions import InvalidTaskError as InvalidTask
            from django_tasks.exceptions import TaskResultDoesNotExist
            from django_tasks.signals import task_enqueued, task_finished, task_started
            from django_tasks.utils import normalize_json

            AVAILABLE = True
        except ImportError:
            AVAILABLE = False
            BaseTaskBackend = object
            Task = TaskContext = TaskResult = TaskError = TaskResultStatus = None
            InvalidTask = TaskResultDoesNotExist = LookupError
            task_enqueued = task_finished = task_started = task_backends = None
            normalize_json = None
            DEFAULT_TASK_QUEUE_NAME = "default"

__all__ = [
    "AVAILABLE",
    "DEFAULT_TASK_QUEUE_NAME",
    "AnyResult",
    "AnyTask",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "normalize_json",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
