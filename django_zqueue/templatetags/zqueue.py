"""``{% load zqueue %}{% zqueue_position job %}``: a live "your place in line" widget; and
the filters the admin pages show figures with: ``zq_count`` (a count with the locale's
thousands separator) and ``zq_when`` (a time in the current zone, with its name).

Renders the job's position now (read through the queue's shared poll, so a page of many
widgets costs one read) and a few lines of plain JavaScript
(``django_zqueue/position.js``) that long-poll its URL and update the text in place. The
token is bound to the signed-in user when there is one, so the URL is of no use to
anybody else; on an anonymous page it is a bearer token valid for one day.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template

from ..exceptions import QueueUnavailable, UnknownQueue
from ..tasks.watch import Position, position_url, watch_of
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
    try:
        pos: Position | None = watch_of(queue).wait(tag)
    except (QueueUnavailable, UnknownQueue):
        pos = None
    line, eta = describe(pos) if pos else ("", "")
    return {
        "url": position_url(queue, tag, user=owner),
        "pos": pos,
        "line": line or "Checking your place in line…",
        "eta": eta,
    }
