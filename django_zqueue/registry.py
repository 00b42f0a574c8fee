"""Task names -> Task objects. The worker runs only what is registered here.

Filled by the ``@task`` decorator as modules are imported; :func:`autodiscover` imports
the ``tasks`` module of every installed app (as the admin does for ``admin``). Nothing
is ever imported because a payload names it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from .exceptions import ConfigurationError

if TYPE_CHECKING:
    from .task import Task

_tasks: dict[str, Task[..., Any]] = {}
_lock = threading.Lock()
_discovered = False


def register(task: Task[..., Any]) -> None:
    with _lock:
        existing = _tasks.get(task.name)
        if existing is not None and existing.func is not task.func:
            where = f"{existing.func.__module__}.{existing.func.__qualname__}"
            raise ConfigurationError(
                f"task name {task.name!r} is already used by {where}; "
                "give one of them another name with @task(name='...')"
            )
        _tasks[task.name] = task


def get(name: str) -> Task[..., Any] | None:
    task = _tasks.get(name)
    if task is None and not _discovered:
        autodiscover()
        task = _tasks.get(name)
    return task


def all_tasks() -> dict[str, Task[..., Any]]:
    return dict(_tasks)


def discovered() -> bool:
    return _discovered


def autodiscover() -> None:
    """Import ``<app>.tasks`` for every installed app (once)."""
    global _discovered
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules("tasks")
    _discovered = True
