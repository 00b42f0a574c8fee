"""The Finished tab's filters: task, error text, arguments and how long ago a job ended
(``…/q/<queue>/?state=finished&task=…&error=…&args=…&since=24h[&ended=…][&offset=…]``).

A filtered tab is one :meth:`queue.read.finished_matching
<django_zqueue.read.QueueReader.finished_matching>` call (newest first, 200 jobs a
round trip pair, about a second at most) after one read of the tab's counts: its
matches, how many jobs it read, and a "look further" link that goes on from where it
stopped. The error and arguments filters need ``view_payload`` (they are payload).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.http import HttpRequest

from ..exceptions import InvalidArgument
from ..read.finished_filter import FilteredFinished, FinishedFilter
from . import dashboard
from .paging import ended_param, int_param

if TYPE_CHECKING:
    from ..queue import Queue

#: the time filter's choices: ``?since=`` -> seconds back
SPANS = {"1h": 3600, "24h": 86_400, "7d": 7 * 86_400}


@dataclass(frozen=True, slots=True)
class History:
    """A filtered Finished tab: its ``page`` (the matches), the read, what was asked
    (``form``), the link that looks further (None at the end), a refusal (``error``)."""

    page: dashboard.Page
    found: FilteredFinished | None
    form: dict[str, str]
    more_url: str | None
    error: str | None = None


def form_of(request: HttpRequest, payload: bool) -> dict[str, str]:
    """The filter's fields as asked (the payload ones only with ``payload``)."""
    form = {"task": request.GET.get("task", "").strip()}
    if payload:
        form["error"] = request.GET.get("error", "").strip()
        form["args"] = request.GET.get("args", "").strip()
    since = request.GET.get("since", "")
    form["since"] = since if since in SPANS else ""
    return form


def read(
    q: Queue,
    request: HttpRequest,
    per_page: int,
    payload: bool,
    link: Callable[..., str],
) -> History | None:
    """The filtered Finished tab; None when no filter is asked (the plain tab)."""
    form = form_of(request, payload)
    if not any(form.values()):
        return None
    ended = ended_param(request)
    offset = max(0, int_param(request.GET.get("offset"), 0))
    counts = q.read.finished(ended, 0, 1, errors=False, live=True)
    since = counts.now_ms - SPANS[form["since"]] * 1000 if form["since"] else None
    found, error = None, None
    try:
        flt = FinishedFilter(form["task"], form.get("error", ""), form.get("args", ""), since)
        found = q.read.finished_matching(flt, ended, per_page, offset)
    except InvalidArgument as exc:
        error = str(exc)
    page = dashboard.Page(
        queue=q.name,
        state="finished",
        counts={**counts.live, "finished": sum(counts.counts.values())},
        rows=[dashboard.finished_row(j, counts.now_ms) for j in found.jobs] if found else [],
        number=1,
        per_page=per_page,
        now_ms=counts.now_ms,
        ended=ended,
        ended_counts=counts.counts,
    )
    more = None
    if found is not None and found.more:
        more = link(
            **{k: v or None for k, v in form.items()}, ended=ended, offset=found.next_offset
        )
    return History(page, found, form, more, error)
