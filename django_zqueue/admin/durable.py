"""The admin's part for durable tasks (docs/durable.md): send an event to a job that
waits for it (``durable.wait_for``) from the job page.

A POST (CSRF-checked by the admin) that needs ``manage_jobs`` and
``ZQUEUE["ADMIN_ACTIONS"]`` (404 when it is False); it goes through
:meth:`Queue.signal <django_zqueue.queue.Queue.signal>` with its checks: a refusal
(no such job, an event delivered already, a wait that timed out, a payload that is not
JSON) is shown as an error message and nothing is written.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.translation import gettext as _

from ..exceptions import InvalidArgument, SignalRefused
from ..queue import get_queue
from . import audit

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
    try:
        woken = get_queue(queue).signal(tag, name, payload)
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
