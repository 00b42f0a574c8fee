"""A queue page's lists: the rows of one tab (:class:`JobRow`), a page of them
(:class:`Page`), read for a state's tab (:func:`page`) or the Finished tab
(:func:`finished_page`). :mod:`django_zqueue.admin.dashboard` re-exports every name; the
admin renders them (:mod:`django_zqueue.admin`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING
from urllib.parse import quote

from .. import read
from ..engine.records import from_ms
from ..exceptions import InvalidArgument
from ..web import humanize
from .dashboard_text import due_in, first_line, local_text, of, task_name

if TYPE_CHECKING:
    from ..queue import Queue

#: tabs of the queue page that list one state each (``waiting``: for their parents,
#: workflows)
STATE_TABS = ("ready", "delayed", "waiting", "leased", "dead")
#: tabs of the queue page: one per state, then the jobs that ended (the history of
#: finished jobs, the dead letters and expired jobs: :mod:`django_zqueue.read.finished`)
TABS = (*STATE_TABS, "finished")
#: the filters of the Finished tab (None: every state a job can end in)
ENDED = read.FINISHED_STATES
MAX_PER_PAGE = 200
#: page numbers are clamped to this, so offsets stay within Redis' integers
MAX_PAGE = 10**9


@dataclass(frozen=True, slots=True)
class JobRow:
    """One job in a list. Fields that don't apply to the list's state are None."""

    tag: str
    state: str
    score: float  # the job's score in its state's ZSET
    rank: int | None = None  # ready: position in line
    priority: int | None = None
    task: str | None = None
    enqueued_at: datetime | None = None
    attempts: int | None = None
    max_retries: int | None = None
    eta_seconds: float | None = None  # ready: estimated seconds until it has run
    run_at: datetime | None = None  # delayed
    consumer: str | None = None  # leased
    started_at: datetime | None = None  # leased: last claim
    lease_deadline: datetime | None = None  # leased
    progress: float | None = None  # leased: 0.0-1.0
    progress_note: str | None = None
    died_at: datetime | None = None  # dead
    error: str | None = None  # dead: first line of the last error (with payload only)
    wait_since: datetime | None = None  # waiting: when it began waiting for its parents
    need: int | None = None  # waiting: parents that must succeed for it to run
    got: int | None = None  # waiting: parents that have succeeded
    gone: bool = False  # the job left its state between the two reads
    now_ms: int = 0
    ended_at: datetime | None = None  # finished (state: how it ended): when
    duration_ms: int | None = None  # finished: its last run's time
    parked: str = ""  # delayed: "sleep" or "event", a durable job parked (see parked_name)
    parked_name: str = ""  # delayed: the durable sleep's or the awaited event's name

    @property
    def quoted_tag(self) -> str:
        """The tag for a query string."""
        return quote(self.tag, safe="")

    @property
    def enqueued_text(self) -> str:
        return local_text(self.enqueued_at)

    @property
    def when_text(self) -> str:
        """Run-at (delayed), lease deadline (leased), time of death (dead) or the start of
        its wait (waiting)."""
        return local_text(self.run_at or self.lease_deadline or self.died_at or self.wait_since)

    def _since(self, when: datetime | None) -> str:
        """How long from ``when`` to the page's read ('' without one)."""
        return "" if when is None else humanize.duration(self.now_ms / 1000 - when.timestamp())

    @property
    def waited(self) -> str:
        """Waiting: how long it has waited for its parents."""
        return self._since(self.wait_since)

    @property
    def parents_text(self) -> str:
        """Waiting: ``got of need`` parents succeeded ('' without links)."""
        return "" if self.need is None else of(self.got or 0, self.need)

    @property
    def started_text(self) -> str:
        return local_text(self.started_at)

    @property
    def progress_percent(self) -> int | None:
        return None if self.progress is None else round(self.progress * 100)

    @property
    def waiting(self) -> str:
        """How long since it was enqueued."""
        return self._since(self.enqueued_at)

    @property
    def eta(self) -> str:
        return humanize.duration(self.eta_seconds)

    @property
    def due_in(self) -> str:
        """Delayed: time until run-at; leased: until the lease deadline (negative: past)."""
        return due_in(self.run_at or self.lease_deadline, self.now_ms)

    @property
    def overdue(self) -> bool:
        """Leased: the lease deadline has passed (scan has not recovered it yet)."""
        return (
            self.lease_deadline is not None and self.lease_deadline.timestamp() * 1000 < self.now_ms
        )

    @property
    def attempts_text(self) -> str:
        if self.attempts is None:
            return ""
        return of(self.attempts, (self.max_retries or 0) + 1)

    @property
    def ended_text(self) -> str:
        return local_text(self.ended_at)

    @property
    def ended_ago(self) -> str:
        """Finished: how long ago it ended."""
        return self._since(self.ended_at)

    @property
    def duration(self) -> str:
        return "" if self.duration_ms is None else humanize.duration(self.duration_ms / 1000)


@dataclass(frozen=True, slots=True)
class Page:
    queue: str
    state: str
    counts: dict[str, int]
    rows: list[JobRow]
    number: int  # 1-based
    per_page: int
    now_ms: int
    workers: int = 0
    mean_run_ms: float | None = None  # from the lifetime counters
    max_pages: int | None = None  # a partitioned queue lists its first MAX_MERGED jobs
    ended: str | None = None  # the Finished tab: the state shown (None: every one)
    ended_counts: dict[str, int] | None = None  # the Finished tab: jobs per ended state

    @property
    def total(self) -> int:
        if self.ended_counts is not None:
            if self.ended is None:
                return sum(self.ended_counts.values())
            return self.ended_counts[self.ended]
        return self.counts[self.state]

    @property
    def listable(self) -> int:
        """How many jobs the pages reach (all but on a merged listing)."""
        return (
            self.total
            if self.max_pages is None
            else min(self.total, self.max_pages * self.per_page)
        )

    @property
    def capped(self) -> bool:
        """The pages reach fewer jobs than there are (a merged listing)."""
        return self.listable < self.total

    @property
    def ended_filters(self) -> list[tuple[str | None, int]]:
        """The Finished tab's filters: (state, count), every ended state first (None)."""
        counts = self.ended_counts or {}
        return [(None, sum(counts.values())), *((s, counts.get(s, 0)) for s in ENDED)]

    @property
    def pages(self) -> int:
        return read.page_count(self.total, self.per_page, self.max_pages)

    @property
    def offset(self) -> int:
        return (self.number - 1) * self.per_page

    @property
    def first_item(self) -> int:
        return self.offset + 1 if self.rows else 0

    @property
    def last_item(self) -> int:
        return self.offset + len(self.rows)


def page(q: Queue, state: str, number: int = 1, per_page: int = 50, *, payload: bool) -> Page:
    """One page of the jobs of ``q`` in ``state``.

    ``ready`` is in rank order (rank = offset + index), ``delayed`` by run-at,
    ``leased`` by lease deadline, ``dead`` most recent death first, ``waiting`` (for
    its parents) oldest wait first. A page number past
    the end gives the last page. Error text is read only when ``payload`` is true.
    Reads :meth:`QueueReader.listing <django_zqueue.read.QueueReader.listing>`.
    """
    if state not in STATE_TABS:
        raise InvalidArgument(f"state must be one of {', '.join(STATE_TABS)}")
    if not 1 <= per_page <= MAX_PER_PAGE:
        raise InvalidArgument(f"per_page must be in [1, {MAX_PER_PAGE}]")
    listing = q.read.listing(state, min(max(1, number), MAX_PAGE), per_page, errors=payload)
    return Page(
        queue=q.name,
        state=state,
        counts={**listing.counts, "finished": listing.ended},
        rows=[job_row(listing, i, job) for i, job in enumerate(listing.jobs)],
        number=listing.number,
        per_page=per_page,
        now_ms=listing.now_ms,
        workers=listing.workers,
        mean_run_ms=listing.mean_run_ms,
        max_pages=listing.max_pages,
    )


def finished_page(
    q: Queue, ended: str | None = None, number: int = 1, per_page: int = 50, *, payload: bool
) -> Page:
    """One page of the Finished tab: the jobs of ``q`` that ended in ``ended`` (None: in
    any state), newest first (:meth:`QueueReader.finished
    <django_zqueue.read.QueueReader.finished>`, two round trips; three past the end).
    With every state, or on a partitioned queue, only the newest ``MAX_ENDED_MERGED``
    jobs are paged. Error text is read only when ``payload`` is true."""
    if ended not in (None, *ENDED):
        raise InvalidArgument(f"ended must be None or one of {', '.join(ENDED)}")
    if not 1 <= per_page <= MAX_PER_PAGE:
        raise InvalidArgument(f"per_page must be in [1, {MAX_PER_PAGE}]")
    merged = ended is None or q.engine.reads.partitions > 1
    max_pages = read.MAX_ENDED_MERGED // per_page if merged else None
    number = min(max(1, number), max_pages or MAX_PAGE)
    got = q.read.finished(ended, (number - 1) * per_page, per_page, errors=payload, live=True)
    last = read.page_count(got.total, per_page, max_pages)
    live = got.live
    if not got.jobs and number > last:  # past the end: the last page (the other tabs'
        number = last  # counts of the first read)
        got = q.read.finished(ended, (number - 1) * per_page, per_page, errors=payload)
    counts = {**live, "finished": sum(got.counts.values())}
    return Page(
        queue=q.name,
        state="finished",
        counts=counts,
        rows=[finished_row(job, got.now_ms) for job in got.jobs],
        number=number,
        per_page=per_page,
        now_ms=got.now_ms,
        max_pages=max_pages,
        ended=ended,
        ended_counts=got.counts,
    )


def finished_row(job: read.FinishedJob, now_ms: int) -> JobRow:
    """The row of one job of the Finished tab (``state``: how it ended)."""
    if job.record is None:  # gone between the two reads (trimmed), or unreadable
        return JobRow(job.tag, job.state, job.ended_ms, gone=True, now_ms=now_ms)
    info = job.info("")
    return JobRow(
        tag=job.tag,
        state=job.state,
        score=job.ended_ms,
        priority=info.priority,
        task=task_name(job.body),
        enqueued_at=info.enqueued_at,
        attempts=info.attempts,
        max_retries=info.max_retries,
        consumer=info.consumer,
        started_at=info.started_at,
        error=first_line(job.error),
        now_ms=now_ms,
        ended_at=from_ms(job.ended_ms),
        duration_ms=info.duration_ms,
    )


def job_row(listing: read.Listing, index: int, job: read.ListedJob) -> JobRow:
    """The row of one listed job (the ``index``-th of its page)."""
    state, record = listing.state, job.record
    # a score is a time (ms) in every state but ready, where it is an order: a sequence
    # in a priority band, or microseconds less a priority's worth (priority_mode="aging")
    when = None if state == "ready" else from_ms(job.score)
    if record is None:  # gone between the two reads, or a record that is not an object
        return JobRow(job.tag, state, job.score, gone=True, now_ms=listing.now_ms)
    rank = listing.offset + index if state == "ready" else None
    progress = job.progress if job.progress and job.progress.value is not None else None
    links = job.links if state == "waiting" else None
    return JobRow(
        tag=job.tag,
        state=state,
        score=job.score,
        rank=rank,
        priority=record.priority,
        task=task_name(job.body),
        enqueued_at=record.enqueued_at,
        attempts=record.attempts,
        max_retries=record.max_retries,
        eta_seconds=None
        if rank is None or not listing.workers  # no live worker: no ETA
        else read.eta_seconds(rank, listing.mean_run_ms, listing.workers),
        run_at=when if state == "delayed" else None,
        consumer=record.consumer if state == "leased" else None,
        started_at=record.started_at if state == "leased" else None,
        lease_deadline=when if state == "leased" else None,
        progress=progress.value if progress else None,
        progress_note=progress.note if progress else None,
        died_at=when if state == "dead" else None,
        error=first_line(job.error) if state == "dead" else None,
        wait_since=when if state == "waiting" else None,
        need=links.need if links else None,
        got=links.got if links else None,
        now_ms=listing.now_ms,
    )
