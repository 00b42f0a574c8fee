"""System checks for ``settings.ZQUEUE`` (ids ``django_zqueue.E001`` ...).

``manage.py check`` reports every problem at once, each with a hint. These checks read
settings only; they never connect to Redis.
"""

from __future__ import annotations

from typing import Any

from django.core import checks

from . import conf


@checks.register("django_zqueue")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return [checks.Error(p.msg, hint=p.hint, id=p.id) for p in conf.problems()]


@checks.register("django_zqueue")
def check_schedules(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Each ZQUEUE["SCHEDULES"] entry must make a valid schedule on a configured queue."""
    from django.conf import settings

    from . import registry
    from .exceptions import ZQueueError
    from .schedules import from_settings

    raw = (getattr(settings, "ZQUEUE", None) or {}).get("SCHEDULES", {})
    if not isinstance(raw, dict):
        return []  # E012 reports the shape
    config, _ = conf.parse(getattr(settings, "ZQUEUE", None))
    if raw:
        registry.autodiscover()  # an entry's queue and priority default to its task's
    errors: list[checks.CheckMessage] = []
    for name, options in raw.items():
        try:
            (schedule,) = from_settings({name: options})
        except (ZQueueError, ValueError, TypeError) as exc:
            errors.append(
                checks.Error(
                    f"ZQUEUE['SCHEDULES'][{name!r}] is invalid: {exc}",
                    hint="Keys: task, cron or interval, timezone, args, kwargs, queue, "
                    "priority, catch_up, max_catch_up, grace.",
                    id="django_zqueue.E013",
                )
            )
            continue
        if schedule.queue not in config.queues:
            errors.append(
                checks.Error(
                    f"ZQUEUE['SCHEDULES'][{name!r}] uses queue {schedule.queue!r}, which is not "
                    "in ZQUEUE['QUEUES'].",
                    hint="Add the queue, or set 'queue' in the schedule.",
                    id="django_zqueue.E013",
                )
            )
    return errors
