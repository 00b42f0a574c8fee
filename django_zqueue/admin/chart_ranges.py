"""A queue page's charts over a chosen range (``?range=1h|24h|7d``): the last hour a point
a minute (the stats ring), the last 24 hours a point per 10 minutes and the last 7 days a
point an hour (the rings the scanner rolls up, :mod:`django_zqueue.engine.rollup`). A
minute or bucket with no figures is a gap in the lines, never a zero."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..read import Minute
from ..web import humanize
from .charts import Chart, line_chart

if TYPE_CHECKING:
    from django.utils.functional import _StrPromise

    from ..queue import Queue

    StrOrPromise = str | _StrPromise


@dataclass(frozen=True, slots=True)
class Range:
    key: str  # the ?range= value
    label: StrOrPromise  # the switcher's link
    size: int  # minutes a point
    points: int
    every: int  # a mark on the time axis every this many points
    unit: StrOrPromise  # how a mark says how far back it is: "-%(n)s min" ...
    per: int  # the mark's figure: points back // per
    span: StrOrPromise  # the window in words, for the charts' names


RANGES = {
    r.key: r
    for r in (
        Range(
            "1h",
            gettext_lazy("1 hour"),
            1,
            60,
            15,
            gettext_lazy("-%(n)s min"),
            1,
            gettext_lazy("the last hour"),
        ),
        Range(
            "24h",
            gettext_lazy("24 hours"),
            10,
            144,
            36,
            gettext_lazy("-%(n)s h"),
            6,
            gettext_lazy("the last 24 hours"),
        ),
        Range(
            "7d",
            gettext_lazy("7 days"),
            60,
            168,
            24,
            gettext_lazy("-%(n)s d"),
            24,
            gettext_lazy("the last 7 days"),
        ),
    )
}
DEFAULT = "1h"


def chosen(request: HttpRequest) -> Range:
    """The range asked for (``?range=``); the last hour when absent or unknown."""
    return RANGES.get(request.GET.get("range", DEFAULT), RANGES[DEFAULT])


def links(url: Callable[[str], str], current: Range) -> list[dict[str, object]]:
    """The switcher: each range's label, its page's URL, whether it is shown."""
    return [
        {"label": str(r.label), "url": url(r.key), "current": r.key == current.key}
        for r in RANGES.values()
    ]


def rows(q: Queue, r: Range) -> list[Minute]:
    """The points of range ``r``, oldest first: one round trip."""
    if r.size > 1:
        return q.read.buckets(r.size, r.points)
    return [
        Minute(
            minute=m["minute"],
            enqueued=m["enqueued"],
            acked=m["acked"],
            failed=m["failed"],
            dead=m["dead"],
            run_ms=m["run_ms"],
            ready=m["ready"],
        )
        for m in q.read.minutes(r.points)
    ]


def _label(r: Range, m: Minute) -> str:
    """A point's time for its hover text: the minute today, the date and time beyond."""
    if r.size == 1:
        return humanize.minute(m.start)
    return timezone.localtime(m.start).strftime("%Y-%m-%d %H:%M %Z")


def charts(q: Queue, r: Range) -> tuple[Chart, Chart]:
    """The depth chart and the throughput chart of queue ``q`` over range ``r``."""
    points = rows(q, r)
    labels = [_label(r, m) for m in points]
    axis = [
        (back, _("now") if back == 0 else str(r.unit) % {"n": back // r.per})
        for back in range(r.points, -1, -r.every)
    ]
    span = str(r.span)
    depth: list[int | None] = [m.ready if m.ready >= 0 else None for m in points]
    per = {1: _("Jobs per minute"), 10: _("Jobs per 10 minutes")}.get(r.size, _("Jobs per hour"))
    return (
        line_chart(
            _("Jobs waiting (ready)"),
            [(_("ready"), "ready", depth)],
            dots=True,  # a lone sample between gaps shows
            labels=labels,
            axis=axis,
            span=span,
        ),
        line_chart(
            per,
            [
                (_(name), name, [getattr(m, name) if m.live else None for m in points])
                for name in ("enqueued", "acked", "failed")
            ],
            latest_index=-2,
            latest_note=_("last complete minute") if r.size == 1 else _("last complete bucket"),
            labels=labels,
            axis=axis,
            span=span,
        ),
    )
