"""Admin display helpers beyond :mod:`django_zqueue.admin.dashboard`: job arguments as HTML with
model instances linked to their admin pages, and the words of a missing permission."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.contrib.admin import AdminSite
from django.urls import NoReverseMatch, reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

from ..tasks.serializer import MARKER
from ..web.humanize import count, duration
from ..worker.taskstats import TaskStat
from .dashboard_text import arguments

#: (text, URL or None) of a model instance sent by reference
Link = Callable[[str, str, Any], tuple[str, str | None]]


def model_link(site: AdminSite) -> Link:
    """``app.Model #pk``, linked to the instance's change page when the model is
    registered with ``site`` (no database query: the page may not exist any more)."""

    def link(app_label: str, model_name: str, pk: Any) -> tuple[str, str | None]:
        try:
            model = apps.get_model(app_label, model_name)
        except LookupError:
            return f"{app_label}.{model_name} #{pk}", None
        text = f"{model._meta.label} #{pk}"
        if not site.is_registered(model):
            return text, None
        try:
            url = reverse(f"{site.name}:{app_label}_{model_name}_change", args=[pk])
        except NoReverseMatch:
            return text, None
        return text, url

    return link


def arguments_html(body: Any, link: Link) -> SafeString:
    """A job's arguments as :func:`~.dashboard.arguments` shows them, escaped, with each
    model instance sent by reference (``{"__zq__": "model", ...}``) shown as ``link``
    gives it, e.g. ``demo.Article #7`` linked to its change page."""
    nonce = secrets.token_hex(8)
    refs: list[tuple[str, str, Any]] = []

    def swap(value: Any) -> Any:
        if isinstance(value, dict):
            if value.get(MARKER) == "model" and {"app_label", "model_name"} <= value.keys():
                refs.append((str(value["app_label"]), str(value["model_name"]), value.get("pk")))
                return f"{nonce}-{len(refs) - 1}"
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    out = str(escape(arguments(swap(body))))
    for i, ref in enumerate(refs):
        text, url = link(*ref)
        shown = format_html('<a href="{}">{}</a>', url, text) if url else escape(text)
        out = out.replace(f"&quot;{nonce}-{i}&quot;", str(shown))
    return mark_safe(out)


def permission_text(codename: str) -> str:
    """The permission's name as the admin shows it, e.g. “Can view queue”."""
    from django.contrib.auth.models import Permission

    found = Permission.objects.filter(
        content_type__app_label="django_zqueue", codename=codename
    ).first()
    return found.name if found else codename


def _bound(ms: int | None) -> str:
    if ms is None:
        return "—"
    if ms < 0:  # past the last bucket
        return _("more than %(duration)s") % {"duration": duration(300)}
    return _("≤ %(duration)s") % {"duration": duration(ms / 1000)}


def task_rows(stats: list[TaskStat]) -> list[dict[str, Any]]:
    """The rows of the queue page's "tasks, last hour" table."""
    return [
        {
            "task": t.task,
            "runs": count(t.runs),
            "failures": count(t.failures),
            "failed": t.failures > 0,
            "retries": count(t.retries),
            "mean": "—" if t.mean_ms is None else duration(t.mean_ms / 1000),
            "p50": _bound(t.percentile_ms(50)),
            "p95": _bound(t.percentile_ms(95)),
            "p99": _bound(t.percentile_ms(99)),
        }
        for t in stats
    ]
