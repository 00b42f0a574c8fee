"""The admin's schedules page: every periodic schedule (in code and added at run time)
with its next and last firing, and the operator's buttons: pause, resume, run now,
remove (runtime schedules only) and a small form to add one.

Reading needs ``view_queue``; every change is a POST (CSRF-checked by the admin), needs
``manage_jobs`` and ``ZQUEUE["ADMIN_ACTIONS"]`` (404 when it is False), and goes through
the runtime API of :mod:`django_zqueue.tasks.schedules`, with its checks: a refusal is shown as
an error message and nothing is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.translation import gettext as _

from .. import conf
from ..exceptions import InvalidArgument
from ..tasks import registry, schedules
from . import audit


class QueueAdmin(Protocol):
    """What these pages use of the admin (:class:`django_zqueue.admin.QueueAdmin`)."""

    @property
    def opts(self) -> Any: ...

    def url(self, view: str, *args: Any, **query: Any) -> str: ...

    def require_view(self, request: HttpRequest) -> None: ...

    def require_actions(self, request: HttpRequest, codename: str) -> None: ...

    def context(
        self, request: HttpRequest, title: str, *crumbs: tuple[str, str | None], **extra: Any
    ) -> dict[str, Any]: ...


#: the permission every change needs (as pausing a queue)
PERMISSION = "manage_jobs"
#: what the buttons post as ``op``
OPS = ("pause", "resume", "run", "remove")


@dataclass(frozen=True, slots=True)
class Row:
    entry: schedules.ScheduleEntry
    when: str  # the cron expression, or "every <n> s"
    stored: bool  # in Redis (a code schedule no worker has synced yet is not)


def _when(e: schedules.ScheduleEntry) -> str:
    return e.cron or f"every {e.every:g} s"


def _may_change(admin: QueueAdmin, request: HttpRequest) -> bool:
    label = admin.opts.app_label
    return conf.get_config().admin_actions and request.user.has_perm(f"{label}.{PERMISSION}")


def _require_change(admin: QueueAdmin, request: HttpRequest) -> None:
    admin.require_actions(request, PERMISSION)


def page(admin: QueueAdmin, request: HttpRequest) -> HttpResponse:
    """The list of schedules, with buttons and the add form for those who may change."""
    admin.require_view(request)
    rows = [Row(e, _when(e), e.next_at is not None or e.paused) for e in schedules.entries()]
    ctx = admin.context(
        request,
        _("Periodic schedules"),
        (_("schedules"), None),
        rows=rows,
        may_change=_may_change(admin, request),
        do_url=admin.url("schedule_do"),
        add_url=admin.url("schedule_add"),
        tasks=sorted(registry.all_tasks()),
        queues=list(conf.get_config().queues),
        form=request.session.pop("zq_schedule_form", {}) if hasattr(request, "session") else {},
    )
    return TemplateResponse(request, "admin/django_zqueue/schedules.html", ctx)


def do(admin: QueueAdmin, request: HttpRequest) -> HttpResponse:
    """Pause, resume, run now or remove the schedule ``name`` (POST ``op``)."""
    _require_change(admin, request)
    op, name = request.POST.get("op", ""), request.POST.get("name", "")
    back = HttpResponseRedirect(admin.url("schedules"))
    if op not in OPS:
        messages.error(request, _("Unknown operation %(op)r.") % {"op": op})
        return back
    if op == "remove" and request.POST.get("confirm") != "yes":
        ctx = admin.context(
            request,
            _("Remove schedule %(name)s?") % {"name": name},
            (_("schedules"), admin.url("schedules")),
            (_("remove"), None),
            name=name,
            do_url=admin.url("schedule_do"),
            back_url=admin.url("schedules"),
        )
        return TemplateResponse(request, "admin/django_zqueue/schedule_remove.html", ctx)
    try:
        text = _run(op, name)
    except InvalidArgument as exc:
        messages.error(request, str(exc))
    else:
        audit.log(request, f"schedule {name}", op, "the schedule")
        messages.success(request, text)
    return back


def _run(op: str, name: str) -> str:
    if op == "pause":
        schedules.pause(name)
        return _("Schedule %(name)s paused: it fires no more until resumed.") % {"name": name}
    if op == "resume":
        schedules.resume(name)
        return _("Schedule %(name)s resumed from its next tick.") % {"name": name}
    if op == "run":
        tag = schedules.run_now(name)
        return _("Schedule %(name)s: job %(tag)s enqueued now.") % {"name": name, "tag": tag}
    schedules.remove(name)
    return _("Schedule %(name)s removed.") % {"name": name}


FIELDS = ("name", "task", "cron", "every", "args", "kwargs", "queue", "timezone")


def add(admin: QueueAdmin, request: HttpRequest) -> HttpResponse:
    """Add a runtime schedule from the form; a refusal keeps what was typed."""
    _require_change(admin, request)
    form = {k: request.POST.get(k, "").strip() for k in FIELDS}
    try:
        entry = schedules.add(form["name"], form["task"], **_values(form))
    except InvalidArgument as exc:
        messages.error(request, str(exc))
        if hasattr(request, "session"):
            request.session["zq_schedule_form"] = form
    else:
        when = _when(entry)
        audit.log(request, f"schedule {entry.name}", "add", f"{entry.task} {when} on {entry.queue}")
        messages.success(request, _("Schedule %(name)s added.") % {"name": entry.name})
    return HttpResponseRedirect(admin.url("schedules"))


def _values(form: dict[str, str]) -> dict[str, Any]:
    """The keyword arguments of ``schedules.add`` from the form's text fields."""
    values: dict[str, Any] = {}
    if form["cron"]:
        values["cron"] = form["cron"]
    if form["every"]:
        try:
            values["every"] = float(form["every"])
        except ValueError as exc:
            raise InvalidArgument(
                f"every must be a number of seconds, got {form['every']!r}"
            ) from exc
    for key, kind in (("args", list), ("kwargs", dict)):
        if form[key]:
            try:
                value = json.loads(form[key])
            except ValueError as exc:
                raise InvalidArgument(f"{key} is not JSON: {exc}") from exc
            if not isinstance(value, kind):
                raise InvalidArgument(f"{key} must be a JSON {kind.__name__}")
            values[key] = value
    if form["queue"]:
        values["queue"] = form["queue"]
    if form["timezone"]:
        values["timezone"] = form["timezone"]
    return values
