"""Task names -> Task objects. The worker runs only what is registered here.

Filled by the ``@task`` decorator as modules are imported; :func:`autodiscover` imports
the ``tasks`` module of every installed app (as the admin does for ``admin``). Nothing
is ever imported because a payload names it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from ..exceptions import ConfigurationError


class Registered(Protocol):
    """What the registry, the schedule engine and the checks know of a task (a
    :class:`~django_zqueue.tasks.task.Task` is one); the worker narrows it to ``Task``."""

    @property
    def name(self) -> str: ...
    @property
    def func(self) -> Callable[..., Any]: ...
    @property
    def queue_name(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def max_retries(self) -> int | None: ...
    @property
    def visibility_timeout(self) -> float | None: ...


_tasks: dict[str, Registered] = {}
_lock = threading.Lock()
_discovered = False


def register(task: Registered) -> None:
    with _lock:
        existing = _tasks.get(task.name)
        if existing is not None and existing.func is not task.func:
            where = f"{existing.func.__module__}.{existing.func.__qualname__}"
            raise ConfigurationError(
                f"task name {task.name!r} is already used by {where}; "
                "give one of them another name with @task(name='...')"
            )
        _tasks[task.name] = task


def get(name: str) -> Registered | None:
    task = _tasks.get(name)
    if task is None and not _discovered:
        autodiscover()
        task = _tasks.get(name)
    return task


def all_tasks() -> dict[str, Registered]:
    return dict(_tasks)


def discovered() -> bool:
    return _discovered


def autodiscover() -> None:
    """Import ``<app>.tasks`` for every installed app (once)."""
    global _discovered
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules("tasks")
    _discovered = True
