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
#: an old name -> the task that runs its queued jobs (``@task(aliases=[...])``)
_aliases: dict[str, Registered] = {}
_lock = threading.Lock()
_discovered = False


def register(task: Registered) -> None:
    """Register ``task`` under its name and its aliases (``task.aliases``, if it has
    any). A name or an alias taken by another task's function is refused, whole."""
    aliases = tuple(getattr(task, "aliases", ()))
    with _lock:
        existing = _tasks.get(task.name) or _aliases.get(task.name)
        if existing is not None and existing.func is not task.func:
            where = f"{existing.func.__module__}.{existing.func.__qualname__}"
            what = "task name" if task.name in _tasks else "alias"
            raise ConfigurationError(
                f"task name {task.name!r} is already used by {where} (as its {what}); "
                "give one of them another name with @task(name='...')"
            )
        for alias in aliases:
            if alias == task.name:
                raise ConfigurationError(f"task {task.name!r}: an alias cannot be its own name")
            other = _tasks.get(alias) or _aliases.get(alias)
            if other is not None and other.func is not task.func:
                where = f"{other.func.__module__}.{other.func.__qualname__}"
                raise ConfigurationError(
                    f"task {task.name!r}: alias {alias!r} is already used by {where}; "
                    "an old name can run the jobs of one task only"
                )
        _tasks[task.name] = task
        for alias in aliases:
            _aliases[alias] = task


def get(name: str) -> Registered | None:
    """The task registered under ``name``, or whose alias it is (None: neither)."""
    task = _tasks.get(name) or _aliases.get(name)
    if task is None and not _discovered:
        autodiscover()
        task = _tasks.get(name) or _aliases.get(name)
    return task


def known(name: str) -> bool:
    """Whether ``name`` is a registered task's name or alias (no autodiscovery)."""
    return name in _tasks or name in _aliases


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
