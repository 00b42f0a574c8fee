"""``{% load zqueue %}{% zqueue_position job %}``: a live "your place in line" widget.

Renders the job's position now (read through the queue's shared poll, so a page of many
widgets costs one read) and a few lines of plain JavaScript
(``django_zqueue/position.js``) that long-poll its URL and update the text in place. The
token is bound to the signed-in user when there is one, so the URL is of no use to
anybody else; on an anonymous page it is a bearer token valid for one day.
"""

from __future__ import annotations

from typing import Any

from django import template

from ..exceptions import QueueUnavailable, UnknownQueue
from ..position import describe
from ..watch import Position, position_url, watch_of

register = template.Library()


@register.inclusion_tag("django_zqueue/position_widget.html", takes_context=True)
def zqueue_position(context: template.Context, job: Any) -> dict[str, Any]:
    """The widget for ``job`` (a :class:`~django_zqueue.job.Job`, or anything with
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
