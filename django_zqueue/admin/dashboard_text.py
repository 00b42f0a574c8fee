"""How the admin dashboard writes what it shows: times in the admin's time zone, ``3 of
5``, how long until a time, a job's task and arguments, the first line of an error. Used
by the overview, the queue page's lists and a job's page
(:mod:`django_zqueue.admin.dashboard`, :mod:`django_zqueue.admin.dashboard_lists`)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.utils.translation import gettext as _

from ..engine.records import from_ms
from ..read import Location
from ..web import humanize

#: the first line of an error is cut to this many characters in lists
ERROR_LINE_CHARS = 300


def local_text(dt: datetime | None) -> str:
    """A time as every admin page shows it (:func:`django_zqueue.web.humanize.when`)."""
    return humanize.when(dt)


def location_when(loc: Location) -> str:
    """What a found job's score means, as text: when it runs (delayed), when its lease
    ends (in flight), when it died (dead), since when it waits for its parents; '' when
    ready (its score is an order, shown as its position)."""
    known = ("delayed", "leased", "dead", "waiting", "expired", "succeeded", "cancelled")
    if loc.score is None or loc.state not in known:
        return ""
    at = humanize.when(from_ms(loc.score))
    return {
        "delayed": _("runs at %(time)s"),
        "leased": _("lease ends at %(time)s"),
        "dead": _("died at %(time)s"),
        "waiting": _("waiting since %(time)s"),
        "expired": _("expired at %(time)s"),
        "succeeded": _("succeeded at %(time)s"),
        "cancelled": _("cancelled at %(time)s"),
    }[loc.state] % {"time": at}


def of(n: int, total: int) -> str:
    """``3 of 5``, each count with the locale's thousands separator."""
    return _("%(n)s of %(total)s") % {"n": humanize.count(n), "total": humanize.count(total)}


def task_name(body: Any) -> str | None:
    """The task of a task-layer body ``{"task": name, "args": ..., "kwargs": ...}``."""
    if isinstance(body, dict) and isinstance(body.get("task"), str):
        return str(body["task"])
    return None


def arguments(body: Any) -> str:
    """A job's arguments as indented JSON: ``args``/``kwargs`` of a task, else the body."""
    if isinstance(body, dict) and "task" in body:
        shown: Any = {k: v for k, v in body.items() if k != "task"}
    else:
        shown = body
    if isinstance(shown, str):
        return shown
    return json.dumps(shown, indent=2, ensure_ascii=False, default=str)


def first_line(text: str | None) -> str | None:
    if not text or not text.strip():
        return None
    line = text.strip().splitlines()[0]
    return line[:ERROR_LINE_CHARS] + ("…" if len(line) > ERROR_LINE_CHARS else "")


def due_in(when: datetime | None, now_ms: int) -> str:
    """``in 3 minutes`` or ``overdue by 3 minutes``: from ``now_ms`` to ``when``."""
    if when is None:
        return ""
    delta = when.timestamp() - now_ms / 1000
    if delta >= 0:
        return _("in %(duration)s") % {"duration": humanize.duration(delta)}
    return _("overdue by %(duration)s") % {"duration": humanize.duration(delta)}
