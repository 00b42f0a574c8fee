"""System checks for ``settings.ZQUEUE`` (ids ``django_zqueue.E001`` ...).

``manage.py check`` reports every problem at once, each with a hint. These checks read
settings only; they never connect to Redis. The one exception is registered for
``check --deploy`` only: it reads the Redis eviction policy (W001, W002).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core import checks

from .. import conf

#: the backend a ``TASKS`` alias names to be ours
BACKEND_PATH = "django_zqueue.backends.ZQueueBackend"


def register_tasks_checks() -> bool:
    """Make sure Django's ``check_tasks`` (which runs each backend's ``check()``: E101-E107
    for ours) is registered when ``settings.TASKS`` names a ZQueueBackend (or a subclass);
    True if so.

    Django registers it when ``django.tasks`` is first imported (Django 6.x) and the
    backport in its app's ``ready()``: a project whose code imports neither before the
    checks run (its Django tasks outside ``tasks.py``, the backport not in
    ``INSTALLED_APPS``) would get no check at all. Importing the framework's own
    ``checks`` module registers the same function, once."""
    from importlib import import_module

    from django.conf import settings
    from django.utils.module_loading import import_string

    aliases = getattr(settings, "TASKS", None)
    if not isinstance(aliases, Mapping):
        return False
    ours = False
    for params in aliases.values():
        path = params.get("BACKEND") if isinstance(params, Mapping) else None
        if path == BACKEND_PATH:
            ours = True
        elif isinstance(path, str) and not ours:  # a subclass of ours?
            try:
                from ..tasks.django_tasks.backend import ZQueueBackend

                found = import_string(path)
            except Exception:
                continue  # the framework reports a backend it cannot import
            ours = isinstance(found, type) and issubclass(found, ZQueueBackend)
    if not ours:
        return False
    from ..tasks.django_tasks.compat import FRAMEWORKS

    if not FRAMEWORKS:
        return False  # no framework: the backend cannot be used, nor checked
    import_module(f"{FRAMEWORKS[0].name}.checks")
    return True


@checks.register("django_zqueue")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return [checks.Error(p.msg, hint=p.hint, id=p.id) for p in conf.problems()]


@checks.register("django_zqueue")
def check_schedules(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Each ZQUEUE["SCHEDULES"] entry must make a valid schedule on a configured queue."""
    from django.conf import settings

    from ..exceptions import ZQueueError
    from ..tasks import registry
    from ..tasks.schedules import from_settings

    setting = getattr(settings, "ZQUEUE", None)
    if not isinstance(setting, Mapping):
        return []  # E001 reports it
    raw = setting.get("SCHEDULES", {})
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
        if registry.get(schedule.task) is None:
            errors.append(
                checks.Error(
                    f"ZQUEUE['SCHEDULES'][{name!r}] names task {schedule.task!r}, which is not "
                    "a registered @task: every tick would be a dead letter.",
                    hint="Use the dotted name of a function decorated with "
                    "django_zqueue.tasks.task (module.function).",
                    id="django_zqueue.E013",
                )
            )
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


@checks.register("django_zqueue")
def check_task_queues(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Every ``@task`` must name a configured queue (else each enqueue would fail).

    Imports the ``tasks`` module of every installed app first, as the worker does."""
    from django.conf import settings

    from ..tasks import registry

    config, problems = conf.parse(getattr(settings, "ZQUEUE", None))
    if any(
        p.id in ("django_zqueue.E001", "django_zqueue.E004", "django_zqueue.E005") for p in problems
    ):
        return []  # the queues themselves are reported
    registry.autodiscover()
    configured = ", ".join(config.queues)
    return [
        checks.Error(
            f"Task {name!r} uses queue {t.queue_name!r}, which is not in ZQUEUE['QUEUES'] "
            f"(configured: {configured}): every enqueue of it would fail.",
            hint=f"Add {t.queue_name!r} to ZQUEUE['QUEUES'], or give @task(queue=...) one of "
            "the configured queues.",
            id="django_zqueue.E015",
        )
        for name, t in sorted(registry.all_tasks().items())
        if t.queue_name not in config.queues
    ]


def eviction_warning(client: Any) -> str | None:
    """A warning when the Redis behind ``client`` may evict keys, else None
    (:func:`django_zqueue.engine.redis.connection.eviction_warning`)."""
    from ..engine.redis.connection import eviction_warning as warning

    return warning(client)


@checks.register("django_zqueue", deploy=True)
def check_redis_deploy(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``manage.py check --deploy`` only: the Redis eviction policy (connects to Redis)."""
    import redis
    from django.conf import settings

    from ..engine.redis.connection import redis_eviction_warning
    from ..exceptions import QueueUnavailable

    config, problems = conf.parse(getattr(settings, "ZQUEUE", None))
    if problems:
        return []  # E0xx reports them
    try:
        warning = redis_eviction_warning(config)
    except (redis.RedisError, QueueUnavailable) as exc:
        return [
            checks.Warning(
                f"Could not read Redis' eviction policy: {exc}",
                hint="Check REDIS_URL; the ACL user needs INFO.",
                id="django_zqueue.W002",
            )
        ]
    if warning is None:
        return []
    return [
        checks.Warning(
            warning,
            hint="CONFIG SET maxmemory-policy noeviction (and in redis.conf), with a maxmemory "
            "that fits your queues.",
            id="django_zqueue.W001",
        )
    ]


#: queued jobs read per state and queue by :func:`check_unregistered_tasks`
UNREGISTERED_SAMPLE = 1000


@checks.register("django_zqueue", deploy=True)
def check_unregistered_tasks(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``manage.py check --deploy`` only: queued jobs (ready, delayed) whose task name no
    ``@task`` registers, neither as its name nor as an alias (W003): a worker would bury
    each as ``unknown task``. Reads the first ``UNREGISTERED_SAMPLE`` ready and delayed
    jobs of each configured queue (connects to Redis; W004 when it cannot)."""
    import redis
    from django.conf import settings

    from ..exceptions import QueueUnavailable
    from ..queue import get_queue
    from ..tasks import registry
    from ..tasks.django_tasks.backend import MARKER

    config, problems = conf.parse(getattr(settings, "ZQUEUE", None))
    if problems:
        return []  # E0xx reports them
    registry.autodiscover()
    found: dict[str, list[str]] = {}
    try:
        for queue in config.queues:
            got = get_queue(queue).read.task_names(UNREGISTERED_SAMPLE, skip=(MARKER,))
            among = "" if got.exact else f" among the first {got.read:,} of {got.queued:,} read"
            for name, count in sorted(got.counts.items()):
                if not registry.known(name):
                    found.setdefault(name, []).append(f"{queue!r}: {count:,}{among}")
    except (redis.RedisError, QueueUnavailable) as exc:
        return [
            checks.Warning(
                f"Could not read the task names of the queued jobs: {exc}",
                hint="Check REDIS_URL.",
                id="django_zqueue.W004",
            )
        ]
    return [
        checks.Warning(
            f"Queued jobs call task {name!r}, which no @task registers (jobs per queue: "
            f"{'; '.join(where)}): a worker would bury each as a dead letter (unknown task).",
            hint=f"If the task was renamed, add @task(aliases=[{name!r}]) to the new one "
            "(docs/tasks.md, 'Renaming a task'); else delete those jobs.",
            id="django_zqueue.W003",
        )
        for name, where in sorted(found.items())
    ]
