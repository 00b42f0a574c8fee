"""The doctor's checks of the Django project: the app's system checks, the registered tasks, the
admin's permissions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...engine.keycheck import Finding as Finding
from ...engine.keycheck import Level as Level
from .common import (
    _count,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import Permission


def _settings() -> Iterator[Finding]:
    """The app's system checks (settings, schedules in settings, tasks' queues)."""
    from django.core import checks

    messages = [
        m
        for m in checks.run_checks(tags=["django_zqueue"])
        if (m.id or "").startswith("django_zqueue.")
    ]
    for m in messages:
        level: Level = "error" if m.level >= checks.ERROR else "warning"
        yield Finding(level, "settings", f"({m.id}) {m.msg}", m.hint or "")
    if not messages:
        yield Finding("ok", "settings", "ZQUEUE passes the system checks")


def _tasks() -> Iterator[Finding]:
    from ...tasks import registry

    registry.autodiscover()
    names = sorted(registry.all_tasks())
    if not names:
        yield Finding(
            "warning",
            "tasks",
            "no @task is registered, so a worker has nothing it may run",
            "define tasks in a module named tasks.py in an installed app (the worker imports "
            "<app>.tasks of every app in INSTALLED_APPS)",
        )
        return
    yield Finding(
        "ok", "tasks", _count(len(names), "%(n)s task registered", "%(n)s tasks registered")
    )


def _admin() -> Iterator[Finding]:
    from django.apps import apps

    if not apps.is_installed("django.contrib.admin") or not apps.is_installed(
        "django.contrib.auth"
    ):
        yield Finding("note", "admin", "django.contrib.admin is not installed: no dashboard")
        return
    from django.db import DatabaseError

    try:
        missing, lacking = _admin_permissions()
    except DatabaseError as exc:
        yield Finding(
            "warning",
            "admin",
            f"cannot read the permissions from the database: {str(exc).strip()}",
            "python manage.py migrate",
        )
        return
    if missing:
        yield Finding(
            "warning",
            "admin",
            f"the permissions {', '.join(missing)} are not in the database: only superusers "
            "see the dashboard",
            "python manage.py migrate (it creates them; the app has no table)",
        )
    elif lacking:
        yield Finding(
            "note",
            "admin",
            f"{_count(lacking, '%(n)s staff user', '%(n)s staff users')} without "
            "django_zqueue.view_queue: "
            "ZQueue > Queues is not in their admin",
            "grant 'Can view queue' (and 'Can see job arguments and errors', 'Can requeue, "
            "delete and purge dead letters' as needed) in Authentication and Authorization > "
            "Groups",
        )
    else:
        yield Finding("ok", "admin", "the dashboard's permissions exist (ZQueue > Queues)")


def _admin_permissions() -> tuple[list[str], int]:
    """(the dashboard's permissions missing from the database, and when none is: how many
    staff users who are not superusers lack view_queue). Raises DatabaseError."""
    from django.contrib.auth.models import Permission

    wanted = {"view_queue", "view_payload", "manage_dead_letters"}
    perms = {
        p.codename: p
        for p in Permission.objects.filter(
            content_type__app_label="django_zqueue", codename__in=wanted
        )
    }
    missing = sorted(wanted - set(perms))
    if missing:
        return missing, 0
    return missing, _staff_without(perms["view_queue"])


def _staff_without(view: Permission) -> int:
    """Staff users, not superusers, granted ``view`` neither directly nor by a group."""
    from django.contrib.auth import get_user_model
    from django.core.exceptions import FieldError
    from django.db.models import Q

    try:
        User = get_user_model()
        return (
            User._default_manager.filter(is_staff=True, is_superuser=False)
            .exclude(Q(user_permissions=view) | Q(groups__permissions=view))
            .distinct()
            .count()
        )
    except FieldError:  # a custom user model without is_staff or is_superuser
        return 0
