"""``@periodic``: run a task on a schedule (cron or interval), declared above ``@task``.

::

    @periodic(cron="0 3 * * *", timezone="Europe/Paris")
    @task(queue="reports")
    def nightly(): ...

The schedule engine (:mod:`.schedules`) stores and fires it; ``@task(cron=...)`` is the
short form for a cron schedule with the task's own options.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

from ...exceptions import ConfigurationError
from ..task import Task
from .spec import CatchUp, Schedule, declare

P = ParamSpec("P")
R = TypeVar("R")


def periodic(
    *,
    cron: str | None = None,
    interval: float | None = None,
    name: str | None = None,
    timezone: str | None = None,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    catch_up: CatchUp = "last",
    max_catch_up: int = 100,
    grace: float = 60.0,
) -> Callable[[Task[P, R]], Task[P, R]]:
    """Run a task on a schedule: ``@periodic(cron="0 3 * * *")`` above ``@task``."""

    def wrap(task_obj: Task[P, R]) -> Task[P, R]:
        if not isinstance(task_obj, Task):
            raise ConfigurationError("@periodic goes above @task (it schedules a Task)")
        declare(
            Schedule(
                name=name or task_obj.name,
                task=task_obj.name,
                queue=task_obj.queue_name,
                cron=cron,
                interval=interval,
                timezone=timezone,
                args=tuple(args),
                kwargs=dict(kwargs or {}),
                priority=task_obj.priority,
                catch_up=catch_up,
                max_catch_up=max_catch_up,
                grace=grace,
            )
        )
        return task_obj

    return wrap
