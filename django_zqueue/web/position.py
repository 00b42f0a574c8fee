"""A job's position in line for the person waiting on it: the JSON view a site includes
(``django_zqueue.urls``), and the words shown for it.

``GET <token>/`` answers at once; ``GET <token>/?after=<version>`` is a long-poll: it
answers when the job's status or rank differs from ``version``, or after
:data:`LONG_POLL` seconds with the same version. Every request reads through the one
shared poll of its queue (:class:`~django_zqueue.tasks.watch.Watch`), so watchers cost Redis
nothing each.

Long-poll rather than server-sent events: it works the same under WSGI and ASGI, through
proxies that buffer responses, and needs no streaming response; the widget asks again as
soon as an answer comes, so a change reaches the page within one poll interval (1 s).
Under WSGI each waiting browser holds one server thread for up to 25 s: count them as
open connections, as with SSE.

An invalid, forged or expired token, a job made for another user and an unknown queue
all answer the same 404; the answer never carries the job's payload, task or error.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from ..exceptions import QueueUnavailable, UnknownQueue
from ..tasks.watch import Position, Target, read_token, watch_of
from .humanize import count, duration

#: seconds a long-poll waits for a change before answering with the same version
LONG_POLL = 25.0


def describe(pos: Position) -> tuple[str, str]:
    """What the widget says: the status line, and the ETA line ('' when unknown)."""
    if pos.status == "waiting":
        n = pos.rank or 0
        line = (
            _("Next in line.")
            if n == 0
            else ngettext("%(n)s job ahead of yours.", "%(n)s jobs ahead of yours.", n)
            % {"n": count(n)}
        )
    elif pos.status == "running" and pos.progress is not None:
        line = _("Running now: %(percent)d%% done.") % {"percent": pos.progress}
        if pos.progress_note:
            line = _("Running now: %(percent)d%% done (%(note)s).") % {
                "percent": pos.progress,
                "note": pos.progress_note,
            }
    else:
        line = {
            "scheduled": _("Scheduled: it joins the line at its start time."),
            "sleeping": _("Paused: it goes on at a set time."),
            "waiting_for_event": _("Waiting for a confirmation before it goes on."),
            "running": _("Running now."),
            "failed": _("It could not be completed."),
            "cancelled": _("Cancelled: it will not run."),
            "expired": _("Expired: it was not run in time, and will not run."),
            "gone": _("It is no longer in the queue: it ended, or was removed."),
        }.get(pos.status, _("Done."))
    eta = ""
    if pos.status == "waiting" and pos.eta_seconds is not None:
        eta = _("Expected in about %(t)s.") % {"t": duration(max(1.0, pos.eta_seconds))}
    return line, eta


def payload(pos: Position) -> dict[str, Any]:
    line, eta = describe(pos)
    return {**pos.as_json(), "text": line, "eta_text": eta}


def allowed(request: HttpRequest, target: Target | None) -> bool:
    """A valid token, and (when it names a user) that user is the one asking."""
    if target is None:
        return False
    if target.user is None:
        return True
    user = getattr(request, "user", None)
    return bool(user and user.is_authenticated and str(user.pk) == target.user)


def not_found() -> JsonResponse:
    """The reply to a token that names no job this request may see."""
    return JsonResponse(
        {"status": "unknown", "text": _("This position is not available.")}, status=404
    )


@never_cache
@require_GET
def position_view(request: HttpRequest, token: str) -> JsonResponse:
    """The position of the job ``token`` names, as JSON (long-poll with ``?after=``)."""
    target = read_token(token)
    if target is None or not allowed(request, target):
        return not_found()
    after = request.GET.get("after") or None
    if after is not None and len(after) > 32:
        after = None
    try:
        watch = watch_of(target.queue)
        pos = watch.wait(target.tag, after, LONG_POLL if after else 0.0)
    except UnknownQueue:
        return not_found()
    except QueueUnavailable:
        return JsonResponse(
            {"status": "unavailable", "text": _("Position unavailable; retrying.")}, status=503
        )
    return JsonResponse(payload(pos))
