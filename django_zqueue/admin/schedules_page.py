"""The admin's schedules page: every periodic schedule (in code and added at run time)
with its next and last firing, and the operator's buttons: pause, resume, run now,
edit and remove (runtime schedules only) and a small form to add one.

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
        edit_url=admin.url("schedule_edit"),
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


#: the fields the edit form changes (``schedules.update``), and ``enabled``
EDIT_FIELDS = ("cron", "every", "args", "kwargs", "timezone")


def _edit_form(e: schedules.ScheduleEntry) -> dict[str, str]:
    """The edit form's fields, filled from the schedule as stored."""
    return {
        "cron": e.cron or "",
        "every": "" if e.every is None else f"{e.every:g}",
        "args": json.dumps(list(e.args)),
        "kwargs": json.dumps(e.kwargs),
        "timezone": e.timezone or "",
        "enabled": "" if e.paused else "on",
    }


def _changes(form: dict[str, str]) -> dict[str, Any]:
    """The keyword arguments of ``schedules.update`` from the edit form: what add's form
    takes, with empty arguments meaning none, and exactly one of cron and every."""
    if bool(form["cron"]) == bool(form["every"]):
        raise InvalidArgument("give either a cron expression or every (seconds), not both")
    values = _values({**form, "queue": "", "timezone": form["timezone"]})
    values.setdefault("args", [])
    values.setdefault("kwargs", {})
    values.setdefault("timezone", None)
    return values


def edit(admin: QueueAdmin, request: HttpRequest) -> HttpResponse:
    """A runtime schedule's form (GET ``name``), and its change (POST): timing (cron or
    every, time zone), arguments and enabled, through ``schedules.update`` (checked as
    ``add`` checks) and pause/resume; a refusal shows the form again with what was typed
    and the error, and nothing is written."""
    _require_change(admin, request)
    name = (request.POST if request.method == "POST" else request.GET).get("name", "")
    back = HttpResponseRedirect(admin.url("schedules"))
    try:
        entry = schedules.get(name)
    except InvalidArgument as exc:
        messages.error(request, str(exc))
        return back
    if entry.source != "runtime":
        messages.error(
            request,
            _("Schedule %(name)s is declared in code: change it in the code.") % {"name": name},
        )
        return back
    form = _edit_form(entry)
    error = None
    if request.method == "POST":
        form = {k: request.POST.get(k, "").strip() for k in (*EDIT_FIELDS, "enabled")}
        try:
            changed = schedules.update(name, **_changes(form))
            enabled = form["enabled"] == "on"
            if enabled and changed.paused:
                changed = schedules.resume(name)
            elif not enabled and not changed.paused:
                changed = schedules.pause(name)
        except InvalidArgument as exc:
            error = str(exc)
        else:
            when = _when(changed)
            state = "paused" if changed.paused else "enabled"
            args = json.dumps({"args": list(changed.args), "kwargs": changed.kwargs})
            audit.log(request, f"schedule {name}", "change", f"{when}, {args}, {state}")
            messages.success(request, _("Schedule %(name)s changed.") % {"name": name})
            return back
    ctx = admin.context(
        request,
        _("Change schedule %(name)s") % {"name": name},
        (_("schedules"), admin.url("schedules")),
        (_("change"), None),
        entry=entry,
        form=form,
        error=error,
        edit_url=admin.url("schedule_edit"),
        back_url=admin.url("schedules"),
    )
    return TemplateResponse(request, "admin/django_zqueue/schedule_edit.html", ctx)
