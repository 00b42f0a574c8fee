"""The admin's search of a queue's jobs by their arguments (``queue.read.search``):
``…/q/<queue>/find/?state=<state>&text=<text>[&cursor=<cursor>]``.

A GET that only reads Redis; the caller (:meth:`QueueAdmin.find_view
<django_zqueue.admin.QueueAdmin.find_view>`) has checked ``view_queue`` and
``view_payload`` (arguments are payload). One page is one :func:`~.read.search.search`
call: at most :data:`PER_PAGE` matches, 1,000 steps of 1,000 jobs or about a second; its
cursor is the next page's link, so a search as deep as the queue goes is a few clicks.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..exceptions import InvalidArgument
from ..queue import Queue
from ..web import humanize
from .dashboard_text import task_name

#: matches listed on one page
PER_PAGE = 50
#: the arguments shown in a row, at most this many characters
ARGS_CHARS = 160
#: the states one may search, as the state tabs name them
STATE_LABELS = {
    "ready": gettext_lazy("ready"),
    "delayed": gettext_lazy("delayed"),
    "waiting": gettext_lazy("waiting"),
    "leased": gettext_lazy("in flight"),
    "dead": gettext_lazy("dead letters"),
    "succeeded": gettext_lazy("succeeded"),
    "cancelled": gettext_lazy("cancelled"),
    "expired": gettext_lazy("expired"),
}


def args_line(body: Any) -> str:
    """A job's arguments on one line, as the job page spaces them (``"user_id": 4242``):
    a task's ``args`` and ``kwargs``, else the body; cut at :data:`ARGS_CHARS`."""
    if isinstance(body, dict) and "task" in body:
        shown: Any = {k: v for k, v in body.items() if k != "task"}
    else:
        shown = body
    line = shown if isinstance(shown, str) else json.dumps(shown, ensure_ascii=False, default=str)
    return line[:ARGS_CHARS] + ("…" if len(line) > ARGS_CHARS else "")


class QueueAdmin(Protocol):
    """What this view uses of the admin (:class:`django_zqueue.admin.QueueAdmin`)."""

    def url(self, view: str, *args: Any, **query: Any) -> str: ...

    def context(
        self, request: HttpRequest, title: str, *crumbs: tuple[str, str | None], **extra: Any
    ) -> dict[str, Any]: ...


def page(admin: QueueAdmin, request: HttpRequest, q: Queue) -> HttpResponse:
    """One page of the jobs of ``?state=`` whose arguments, task name or id hold
    ``?text=``, from ``?cursor=`` (the start when absent)."""
    text = request.GET.get("text", "")
    state = request.GET.get("state", "ready")
    if state not in STATE_LABELS:
        state = "ready"
    cursor = request.GET.get("cursor") or None
    result, error = None, None
    if text:
        try:
            result = q.read.search(text, state, PER_PAGE, cursor)
        except InvalidArgument as exc:
            error = str(exc)
    matches = result.matches if result else []
    infos = {i.tag: i for i in q.read.infos([(m.tag, m.shard) for m in matches])}
    rows = []
    for m in matches:
        info = infos.get(m.tag)  # None: gone since it was found
        body = info.body if info is not None else None
        rows.append(
            {
                "m": m,
                "url": admin.url("job", q.name, id=m.tag),
                "rank": humanize.count(m.rank),
                "task": task_name(body) or "",
                "args": args_line(body) if info is not None else "",
                "gone": info is None,
            }
        )
    more = None
    if result is not None and result.cursor is not None:
        more = admin.url("find", q.name, state=state, text=text, cursor=result.cursor)
    ctx = admin.context(
        request,
        _("Search the arguments of queue %(queue)s") % {"queue": q.name},
        (q.name, admin.url("queue", q.name, state=state)),
        (_("search arguments"), None),
        queue=q.name,
        state=state,
        states=list(STATE_LABELS.items()),
        text=text,
        result=result,
        rows=rows,
        looked=humanize.count(result.looked) if result else None,
        continued=cursor is not None,
        next_url=more,
        restart_url=admin.url("find", q.name, state=state, text=text),
        find_url=admin.url("find", q.name),
        error=error,
        multi=q.partitions > 1,
    )
    return TemplateResponse(request, "admin/django_zqueue/find.html", ctx)
