"""The queue page's paging: its query parameters (state tab, page size, page or filter
window), the page of jobs it shows, and the links of its paginator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest

from ..queue import Queue
from . import dashboard, filters

PER_PAGE_CHOICES = (25, 50, 100, 200)
DEFAULT_PER_PAGE = 50


def int_param(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def page_links(pg: dashboard.Page, link: Callable[[int], str]) -> list[dict[str, Any]]:
    """The paginator: the first two pages, the last two, two each side of the current
    one, and a gap (``number`` None) wherever pages are left out."""
    numbers = sorted(
        {
            n
            for n in (1, 2, pg.pages - 1, pg.pages, *range(pg.number - 2, pg.number + 3))
            if 1 <= n <= pg.pages
        }
    )
    pages: list[dict[str, Any]] = []
    for n in numbers:
        if pages and n - pages[-1]["number"] > 1:
            pages.append({"number": None})
        pages.append({"number": n, "url": link(n), "current": n == pg.number})
    return pages


def per_page_choices(url: Callable[[int | None], str], per_page: int) -> list[dict[str, Any]]:
    return [
        {"n": n, "current": n == per_page, "url": url(n if n != DEFAULT_PER_PAGE else None)}
        for n in PER_PAGE_CHOICES
    ]


def listing(
    q: Queue, state: str, request: HttpRequest, per_page: int, payload: bool
) -> tuple[dashboard.Page, filters.Scan | None, filters.Filter]:
    """The page of the queue view: a window of matches when a filter is set; on the
    Finished tab, a page of the jobs that ended in the state ``?ended=`` names (none:
    any), which takes no filter."""
    flt = filters.Filter.of(request.GET.get("task"), request.GET.get("error"))
    page = int_param(request.GET.get("page"), 1)
    if state == "finished":
        ended = ended_param(request)
        return dashboard.finished_page(q, ended, page, per_page, payload=payload), None, flt
    if flt.active:
        sc = filters.scan(q, state, int_param(request.GET.get("window"), 1), flt, payload=payload)
        return sc.page, sc, flt
    return dashboard.page(q, state, page, per_page, payload=payload), None, flt


def ended_param(request: HttpRequest) -> str | None:
    """The Finished tab's filter: ``?ended=`` one of the states a job ends in, else None
    (every one)."""
    ended = request.GET.get("ended")
    return ended if ended in dashboard.ENDED else None


def page_params(request: HttpRequest) -> tuple[str, int]:
    """The queue page's state tab and page size, from the query (defaults when bad)."""
    state = request.GET.get("state", "ready")
    if state not in dashboard.TABS:
        state = "ready"
    per_page = int_param(request.GET.get("per_page"), DEFAULT_PER_PAGE)
    if per_page not in PER_PAGE_CHOICES:
        per_page = DEFAULT_PER_PAGE
    return state, per_page


def queue_links(
    url: Callable[..., str],
    queue: str,
    state: str,
    per_page: int,
    flt: filters.Filter,
    ended: str | None = None,
) -> tuple[Callable[[int], str], Callable[[int], str]]:
    """The queue page's links: to page N of the state (of the Finished tab's ``ended``
    filter), and to window N of a filter."""

    def link(number: int) -> str:
        size = per_page if per_page != DEFAULT_PER_PAGE else None
        return url("queue", queue, state=state, ended=ended, page=number, per_page=size)

    def scan_link(window: int) -> str:
        task, error = flt.task or None, flt.error or None
        return url("queue", queue, state=state, task=task, error=error, window=window)

    return link, scan_link
