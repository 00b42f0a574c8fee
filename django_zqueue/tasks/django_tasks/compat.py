"""Django's Tasks framework: ``django.tasks`` (Django >= 6.0) or the ``django-tasks``
backport (Django 5.2). One import place, so the rest of the package needs no branches.

Type checking always sees ``django.tasks`` (django-stubs describes it); at run time the
backport stands in for it on Django 5.2, with the same names and shapes.

On Django >= 6.0 with the backport installed too, both frameworks are live: a task object
of the backport (a ``django_tasks`` Task, e.g. declared on a backport backend and then
``using(backend=...)`` one of ours) runs with the backport's own ``TaskContext``,
``TaskResult``, ``TaskError`` and signals (so its logger, ``django_tasks``, sees it):
:func:`framework_of` tells which. The exceptions the backend raises are of both frameworks
(:data:`InvalidTask`, :data:`TaskResultDoesNotExist`), so either's ``except`` catches them.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class Framework:
    """The classes and signals of one Tasks framework (``django.tasks`` or the backport)."""

    name: str  # its logger's name too
    Task: Any
    TaskResult: Any
    TaskContext: Any
    TaskError: Any
    TaskResultStatus: Any
    InvalidTask: Any
    task_enqueued: Any
    task_started: Any
    task_finished: Any


def _frameworks() -> tuple[Framework, ...]:
    found: list[Framework] = []
    try:
        from django.tasks import base as dj_base
        from django.tasks import exceptions as dj_exc
        from django.tasks import signals as dj_signals

        found.append(
            Framework(
                "django.tasks",
                dj_base.Task,
                dj_base.TaskResult,
                dj_base.TaskContext,
                dj_base.TaskError,
                dj_base.TaskResultStatus,
                dj_exc.InvalidTask,
                dj_signals.task_enqueued,
                dj_signals.task_started,
                dj_signals.task_finished,
            )
        )
    except ImportError:
        pass
    try:
        from django_tasks import base as bp_base  # type: ignore[import-untyped,unused-ignore]
        from django_tasks import exceptions as bp_exc  # type: ignore[import-untyped,unused-ignore]
        from django_tasks import signals as bp_signals  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return tuple(found)
    if not any(f.Task is bp_base.Task for f in found):
        found.append(
            Framework(
                "django_tasks",
                bp_base.Task,
                bp_base.TaskResult,
                bp_base.TaskContext,
                bp_base.TaskError,
                bp_base.TaskResultStatus,
                bp_exc.InvalidTaskError,
                bp_signals.task_enqueued,
                bp_signals.task_started,
                bp_signals.task_finished,
            )
        )
    return tuple(found)


#: the live frameworks, this package's own (the one ``Task`` above names) first
FRAMEWORKS: tuple[Framework, ...] = _frameworks() if AVAILABLE else ()
#: the classes a job's task path must name: a Task of either framework
TASK_CLASSES: tuple[type, ...] = tuple(f.Task for f in FRAMEWORKS)


def framework_of(task: Any) -> Framework:
    """The framework a task object belongs to (this package's own when in doubt)."""
    for f in FRAMEWORKS:
        if isinstance(task, f.Task):
            return f
    return FRAMEWORKS[0]


def _both(name: str, classes: list[type]) -> Any:
    """One exception class that is each framework's, so either framework's ``except``
    clause catches it."""
    unique = list(dict.fromkeys(classes))
    if len(unique) == 1:
        return unique[0]
    return type(name, tuple(unique), {"__module__": __name__})


if not TYPE_CHECKING and len(FRAMEWORKS) > 1:
    from django_tasks.exceptions import TaskResultDoesNotExist as _bp_missing

    InvalidTask = _both("InvalidTask", [f.InvalidTask for f in FRAMEWORKS])
    TaskResultDoesNotExist = _both("TaskResultDoesNotExist", [TaskResultDoesNotExist, _bp_missing])

__all__ = [
    "AVAILABLE",
    "DEFAULT_TASK_QUEUE_NAME",
    "FRAMEWORKS",
    "TASK_CLASSES",
    "AnyResult",
    "AnyTask",
    "BaseTaskBackend",
    "Framework",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "framework_of",
    "normalize_json",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
