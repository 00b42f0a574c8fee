"""Filters of the queue page: by task name, and by error text in dead letters, over a
bounded window of a state's jobs (the state is the page's tab).

Nothing in Redis is indexed by task or error, so a filter reads :data:`WINDOW` jobs in
order (one listing: three round trips whatever the queue holds) and keeps the matches;
"scan further" reads the next window. Never an unbounded command.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..read import ListedJob
from . import dashboard

if TYPE_CHECKING:
    from ..queue import Queue

#: jobs read per filtered page (every match of a window is shown: at most this many rows)
WINDOW = 200
#: longest filter text
MAX_TEXT = 200


@dataclass(frozen=True, slots=True)
class Filter:
    """Case-insensitive substrings: of the task name, and of the last error (dead)."""

    task: str = ""
    error: str = ""

    @classmethod
    def of(cls, task: str | None, error: str | None) -> Filter:
        return cls((task or "").strip()[:MAX_TEXT], (error or "").strip()[:MAX_TEXT])

    @property
    def active(self) -> bool:
        return bool(self.task or self.error)

    def matches(self, job: ListedJob) -> bool:
        if self.task:
            name = dashboard.task_name(job.body) or ""
            if self.task.casefold() not in name.casefold():
                return False
        if self.error:
            return self.error.casefold() in (job.error or "").casefold()
        return True


@dataclass(frozen=True, slots=True)
class Scan:
    """One filtered window: the matching rows of jobs ``first`` to ``last`` (1-based) of the
    ``total`` in the state."""

    page: dashboard.Page  # rows: the matches only
    window: int  # 1-based
    first: int
    last: int
    total: int

    @property
    def more(self) -> bool:
        return self.last < self.total and self.last == self.window * WINDOW


def scan(q: Queue, state: str, window: int, flt: Filter, *, payload: bool) -> Scan:
    """Window ``window`` of ``state``'s jobs, filtered; the error filter applies only with
    ``payload`` (error text is payload)."""
    if not payload:
        flt = Filter(flt.task, "")
    listing = q.read.listing(
        state, max(1, min(window, dashboard.MAX_PAGE)), WINDOW, errors=bool(flt.error)
    )
    rows = [
        dashboard.job_row(listing, i, job)
        for i, job in enumerate(listing.jobs)
        if job.record is not None and flt.matches(job)
    ]
    page = dashboard.Page(
        queue=q.name,
        state=state,
        counts={**listing.counts, "finished": listing.ended},
        rows=rows,
        number=listing.number,
        per_page=WINDOW,
        now_ms=listing.now_ms,
        workers=listing.workers,
        mean_run_ms=listing.mean_run_ms,
        max_pages=listing.max_pages,
    )
    first = listing.offset + 1 if listing.jobs else 0
    return Scan(page, listing.number, first, listing.offset + len(listing.jobs), page.total)
