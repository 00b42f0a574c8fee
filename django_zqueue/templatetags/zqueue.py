"""``{% load zqueue %}{% zqueue_position job %}``: a live "your place in line" widget; and
the filters the admin pages show figures with: ``zq_count`` (a count with the locale's
thousands separator) and ``zq_when`` (a time in the current zone, with its name).

Renders the job's position now (read through the queue's shared poll, so a page of many
widgets costs one read) and a few lines of plain JavaScript
(``django_zqueue/position.js``) that follow its server-sent events (position, streamed
output, end; long-polling its position where ``EventSource`` is missing) and update it
in place; without JavaScript the page reloads itself every 10 seconds until the end. The
token is bound to the signed-in user when there is one, so the URL is of no use to
anybody else; on an anonymous page it is a bearer token valid for one day.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.urls import reverse

from ..engine.jobstreams import Chunk
from ..exceptions import QueueUnavailable, UnknownQueue
from ..tasks.job import Job
from ..tasks.watch import Position, make_token, watch_of
from ..web import humanize
from ..web.position import describe

register = template.Library()


@register.filter
def zq_count(n: int | None) -> str:
    """``12345|zq_count``: ``12,345`` (:func:`django_zqueue.web.humanize.count`)."""
    return humanize.count(n)


@register.filter
def zq_when(dt: datetime | None) -> str:
    """A time as every admin page shows it (:func:`django_zqueue.web.humanize.when`)."""
    return humanize.when(dt)


@register.inclusion_tag("django_zqueue/position_widget.html", takes_context=True)
def zqueue_position(context: template.Context, job: Any) -> dict[str, Any]:
    """The widget for ``job`` (a :class:`~django_zqueue.tasks.job.Job`, or anything with
    ``queue_name`` and ``id``)."""
    request = context.get("request")
    user = getattr(request, "user", None)
    owner = user if user is not None and user.is_authenticated else None
    queue, tag = str(job.queue_name), str(job.id)
    chunks: list[Chunk] = []
    try:
        pos: Position | None = watch_of(queue).wait(tag)
        chunks = Job(tag, queue).stream()  # what it streamed so far (the first 1,000 chunks)
    except (QueueUnavailable, UnknownQueue):
        pos = None
    line, eta = describe(pos) if pos else ("", "")
    token = make_token(queue, tag, user=owner)
    return {
        "url": reverse("django_zqueue:position", args=[token]),
        # the server-sent events of its position and streamed output (web/stream.py)
        "stream_url": reverse("django_zqueue:stream", args=[token]),
        "pos": pos,
        "output": "".join(c.text for c in chunks),
        "after": chunks[-1].id if chunks else "0",  # the events resume after it
        "final": pos is not None and pos.status in ("done", "failed", "cancelled", "expired"),
        "line": line or "Checking your place in line…",
        "eta": eta,
    }
