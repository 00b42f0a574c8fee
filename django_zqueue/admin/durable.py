"""The admin's part for durable tasks (docs/durable.md): send an event to a job that
waits for it (``durable.wait_for``) from the job page, and what a parked job is parked
for (sleeping until ..., waiting for ...).

A POST (CSRF-checked by the admin) that needs ``manage_jobs`` and
``ZQUEUE["ADMIN_ACTIONS"]`` (404 when it is False); it goes through
:meth:`Queue.signal <django_zqueue.queue.Queue.signal>` with its checks: a refusal
(no such job, an event delivered already, a wait that timed out, a payload that is not
JSON) is shown as an error message and nothing is written. The form offers the names
the job waits for; to a job parked waiting for an event, a name it does not wait for
(a typo: ``aproved`` for ``approved``) is refused, naming those it waits for, unless
``ahead`` is ticked (an event sent ahead, for a wait the job has not reached).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Protocol

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.translation import gettext as _

from ..exceptions import InvalidArgument, SignalRefused
from ..queue import Queue, get_queue
from ..queue.durable_calls import DurableRecord, ParkedFor, durable_records, parked
from . import audit, dashboard

#: the longest payload the form takes, in characters (the queue's own bound is larger)
MAX_FORM_PAYLOAD = 65_536


class QueueAdmin(Protocol):
    """What this view uses of the admin (:class:`django_zqueue.admin.QueueAdmin`)."""

    def url(self, view: str, *args: Any, **query: Any) -> str: ...

    def require_actions(self, request: HttpRequest, codename: str) -> None: ...


def _payload(text: str) -> Any:
    """The form's payload: empty is None, else JSON (``ValueError`` when it is not)."""
    if not text.strip():
        return None
    if len(text) > MAX_FORM_PAYLOAD:
        raise ValueError(_("the payload is longer than %(n)s characters") % {"n": MAX_FORM_PAYLOAD})
    return json.loads(text)


def waited_names(records: list[DurableRecord], now: ParkedFor | None = None) -> list[str]:
    """The events a durable job waited for (its ``wait`` records, and the one it is
    parked for now) and has not received, in name order."""
    got = {r.name for r in records if r.kind == "event"}
    names = {r.name for r in records if r.kind == "wait"}
    if now is not None and now.kind == "event":
        names.add(now.name)
    return sorted(names - got)


def parked_now(q: Queue, tag: str, records: list[DurableRecord]) -> ParkedFor | None:
    """What job ``tag`` is parked for; None when it is not (or keeps no durable records:
    no read then)."""
    return parked(q, tag) if records else None


def with_parked(q: Queue, page: dashboard.Page) -> dashboard.Page:
    """A page of the Delayed tab whose parked durable jobs say what they are parked for
    (one more round trip: ``parked`` of each row)."""
    found = q.engine.durable.parked_many([r.tag for r in page.rows if not r.gone])
    rows = [
        replace(r, parked=p.kind, parked_name=p.name) if (p := found.get(r.tag)) else r
        for r in page.rows
    ]
    return replace(page, rows=rows)


def _typo(q: Queue, tag: str, name: str) -> list[str] | None:
    """The names job ``tag`` waits for when it is parked for an event and ``name`` is
    not one of them; None when the event may go."""
    now = parked(q, tag)
    if now is None or now.kind != "event":
        return None
    names = waited_names(durable_records(q, tag), now)
    return None if name in names else names


def signal(admin: QueueAdmin, request: HttpRequest, queue: str) -> HttpResponse:
    """Deliver the form's event (``name``, JSON ``payload``) to job ``id`` of ``queue``,
    then back to the job's page with what happened."""
    admin.require_actions(request, "manage_jobs")
    tag, name = request.POST.get("id", ""), request.POST.get("name", "").strip()
    back = HttpResponseRedirect(admin.url("job", queue, id=tag))
    try:
        payload = _payload(request.POST.get("payload", ""))
    except ValueError as exc:
        messages.error(request, _("Nothing sent: the payload is not JSON (%(e)s).") % {"e": exc})
        return back
    q = get_queue(queue)
    waits = _typo(q, tag, name) if tag and name and request.POST.get("ahead") != "1" else None
    if waits is not None:
        text = _(
            "Nothing sent: job %(tag)s waits for %(names)s, not %(name)s. To send %(name)s "
            "for a wait it has not reached yet, tick “ahead”."
        )
        names = ", ".join(waits)
        messages.error(request, text % {"tag": tag, "names": names, "name": name})
        return back
    try:
        woken = q.signal(tag, name, payload)
    except (InvalidArgument, SignalRefused) as exc:
        messages.error(request, _("Nothing sent: %(e)s") % {"e": exc})
        return back
    audit.log(request, queue, "send event", f"{name} to job {tag} ({'woken' if woken else 'kept'})")
    if woken:
        text = _("Event %(name)s delivered to job %(tag)s: it runs again now.")
    else:
        text = _("Event %(name)s kept for job %(tag)s: it gets it when it waits for it.")
    messages.success(request, text % {"name": name, "tag": tag})
    return back
