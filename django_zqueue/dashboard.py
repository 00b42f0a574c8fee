"""The admin dashboard's shaping for display: rows, charts and text, from the reads of
:mod:`django_zqueue.read`.

Every Redis read and every decoding of what Redis holds (job records, the stats hash,
worker registrations) is in :mod:`django_zqueue.read` and :mod:`django_zqueue.records`;
this module turns their results into what the templates show: job rows with their
times, ranks and ETAs as text, pages of a tab, the overview's rows (its SVG charts are
:mod:`django_zqueue.charts`), a job's detail. Each page's Redis cost is that of its
read (see docs/admin.md).

No Django views here: :mod:`django_zqueue.admin` renders what these functions return.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from django.utils.translation import gettext as _

from . import humanize, read
from .charts import Chart as Chart
from .charts import Line as Line
from .charts import Tick as Tick
from .charts import line_chart as line_chart
from .charts import nice_ceiling as nice_ceiling
from .charts import wants_log as wants_log
from .exceptions import InvalidArgument
from .read import SERIES as SERIES  # the per-minute series of the stats ring
from .read import Location as Location
from .read import Minute as Minute
from .read import ScheduleRow as ScheduleRow
from .read import valid_tag as valid_tag
from .records import JobInfo, Progress, from_ms

if TYPE_CHECKING:
    from .queue import Queue

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
#: the first line of an error is cut to this many characters in lists
ERROR_LINE_CHARS = 300


def local_text(dt: datetime | None) -> str:
    """A time as every admin page shows it (:func:`django_zqueue.humanize.when`)."""
    return humanize.when(dt)


def location_when(loc: Location) -> str:
    """What a found job's score means, as text: when it runs (delayed), when its lease
    ends (in flight), when it died (dead), since when it waits for its parents; '' when
    ready (its score is an order, shown as its position)."""
    known = ("delayed", "leased", "dead", "waiting", "expired", "succeeded", "cancelled")
    if loc.score is None or loc.state not in known:
        return ""
    at = humanize.when(from_ms(loc.score))
    return {
        "delayed": _("runs at %(time)s"),
        "leased": _("lease ends at %(time)s"),
        "dead": _("died at %(time)s"),
        "waiting": _("waiting since %(time)s"),
        "expired": _("expired at %(time)s"),
        "succeeded": _("succeeded at %(time)s"),
        "cancelled": _("cancelled at %(time)s"),
    }[loc.state] % {"time": at}


def of(n: int, total: int) -> str:
    """``3 of 5``, each count with the locale's thousands separator."""
    return _("%(n)s of %(total)s") % {"n": humanize.count(n), "total": humanize.count(total)}


def task_name(body: Any) -> str | None:
    """The task of a task-layer body ``{"task": name, "args": ..., "kwargs": ...}``."""
    if isinstance(body, dict) and isinstance(body.get("task"), str):
        return str(body["task"])
    return None


def arguments(body: Any) -> str:
    """A job's arguments as indented JSON: ``args``/``kwargs`` of a task, else the body."""
    if isinstance(body, dict) and "task" in body:
        shown: Any = {k: v for k, v in body.items() if k != "task"}
    else:
        shown = body
    if isinstance(shown, str):
        return shown
    return json.dumps(shown, indent=2, ensure_ascii=False, default=str)


def first_line(text: str | None) -> str | None:
    if not text or not text.strip():
        return None
    line = text.strip().splitlines()[0]
    return line[:ERROR_LINE_CHARS] + ("…" if len(line) > ERROR_LINE_CHARS else "")


def due_in(when: datetime | None, now_ms: int) -> str:
    """``in 3 minutes`` or ``overdue by 3 minutes``: from ``now_ms`` to ``when``."""
    if when is None:
        return ""
    delta = when.timestamp() - now_ms / 1000
    if delta >= 0:
        return _("in %(duration)s") % {"duration": humanize.duration(delta)}
    return _("overdue by %(duration)s") % {"duration": humanize.duration(delta)}


# ---------------------------------------------------------------- overview


@dataclass(frozen=True, slots=True)
class QueueSummary:
    name: str
    ready: int
    delayed: int
    inflight: int
    dead: int
    lag_seconds: float | None  # now - enqueued at of the job at rank 0; None when empty
    workers: int  # live worker threads
    counters: dict[str, int]  # lifetime counters (enqueued, acked, failed, retried, ...)
    minutes: list[Minute]  # oldest first
    now_ms: int  # Redis time of the snapshot
    waiting: int = 0  # jobs waiting for their parents (workflows)
    paused: bool = False  # Queue.pause(): workers are handed none of its jobs

    @property
    def last_minute(self) -> Minute:
        """The last complete minute (the one before the current one)."""
        return self.minutes[-2] if len(self.minutes) > 1 else self.minutes[-1]

    @property
    def lag(self) -> str:
        return humanize.duration(self.lag_seconds)

    def depth_chart(self) -> Chart:
        depth: list[int | None] = [m.ready if m.ready >= 0 else None for m in self.minutes]
        depth[-1] = self.ready  # the current depth is known exactly
        return line_chart(
            _("Jobs waiting (ready)"),
            [(_("ready"), "ready", depth)],
            dots=True,
            latest_note=_("now"),
            labels=self.minute_labels,
        )

    @property
    def minute_labels(self) -> list[str]:
        """Each minute of the charts as its local time: ``14:03 CEST``."""
        return [humanize.minute(m.start) for m in self.minutes]

    def throughput_chart(self) -> Chart:
        return line_chart(
            _("Jobs per minute"),
            [
                (_("enqueued"), "enqueued", [m.enqueued for m in self.minutes]),
                (_("acked"), "acked", [m.acked for m in self.minutes]),
                (_("failed"), "failed", [m.failed for m in self.minutes]),
            ],
            latest_index=-2,
            latest_note=_("last complete minute"),
            labels=self.minute_labels,
        )


def locate(queues: Sequence[Queue], tag: str) -> list[Location]:
    """Where job ``tag`` is, in each of ``queues`` that has it
    (:func:`django_zqueue.read.locate`)."""
    return read.locate([q.engine for q in queues], tag)


def schedules(queues: Sequence[Queue]) -> list[ScheduleRow]:
    """The periodic schedules of ``queues`` (:func:`django_zqueue.read.schedules`)."""
    return read.schedules([q.engine for q in queues])


def overview(queues: Sequence[Queue], last: int = 60) -> list[QueueSummary]:
    """A summary of each queue: counts, lag, live workers, counters and ``last`` minutes
    (:func:`django_zqueue.read.overview`: two round trips per Redis client)."""
    if not 1 <= last <= 63:
        raise InvalidArgument("last must be in [1, 63]")
    return [
        QueueSummary(
            name=f.name,
            ready=f.ready,
            delayed=f.delayed,
            inflight=f.inflight,
            dead=f.dead,
            lag_seconds=f.lag_seconds,
            workers=f.workers,
            counters=f.counters,
            minutes=f.minutes(last),
            now_ms=f.now_ms,
            waiting=f.waiting,
            paused=f.paused,
        )
        for f in read.overview([q.engine for q in queues])
    ]


# ---------------------------------------------------------------- one queue, one page


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
    merged = ended is None or len(q.engine.shards) > 1
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


# ---------------------------------------------------------------- one job


@dataclass(frozen=True, slots=True)
class JobDetail:
    info: JobInfo
    task: str | None
    arguments: str | None  # None: hidden (no payload permission)
    last_error: str | None  # None: none, or hidden
    error_hidden: bool
    eta_seconds: float | None
    now_ms: int
    workers: int = 0  # live worker threads

    @property
    def eta_note(self) -> str:
        """Why there is no ETA."""
        return _("no live worker") if not self.workers else _("nothing has run yet to measure")

    @property
    def eta(self) -> str:
        return humanize.duration(self.eta_seconds)

    @property
    def waiting(self) -> str:
        return humanize.duration(self.now_ms / 1000 - self.info.enqueued_at.timestamp())

    @property
    def progress(self) -> Progress | None:
        return Progress.of(self.info.progress)

    @property
    def progress_value(self) -> float | None:
        return self.progress.value if self.progress else None

    @property
    def progress_percent(self) -> int | None:
        v = self.progress_value
        return None if v is None else round(v * 100)

    @property
    def progress_note(self) -> str | None:
        return self.progress.note if self.progress else None

    @property
    def progress_at(self) -> datetime | None:
        return self.progress.at if self.progress else None

    @property
    def due_in(self) -> str:
        return due_in(self.info.run_at or self.info.lease_deadline, self.now_ms)

    @property
    def attempts_text(self) -> str:
        return of(self.info.attempts, self.info.max_retries + 1)

    @property
    def ended_ago(self) -> str:
        """How long ago it ended ('' while it is live)."""
        end = self.info.ended_at
        return "" if end is None else humanize.duration(self.now_ms / 1000 - end.timestamp())

    @property
    def duration(self) -> str:
        """Its last run's time ('' when unknown: it has not ended, or never started)."""
        ms = self.info.duration_ms
        return "" if ms is None else humanize.duration(ms / 1000)

    @property
    def result_text(self) -> str:
        """Its kept result as indented JSON ('' when none is kept)."""
        if not self.info.result_kept:
            return ""
        return json.dumps(self.info.result, indent=2, ensure_ascii=False, default=str)


def job(q: Queue, tag: str, *, payload: bool) -> JobDetail | None:
    """Everything about one job (:meth:`QueueReader.job
    <django_zqueue.read.QueueReader.job>`), with arguments and error text only when
    ``payload`` is true. None when there is no such job (or the tag is invalid)."""
    if not valid_tag(tag):
        return None
    reading = q.read.job(tag)
    if reading is None:
        return None
    info = reading.info
    eta = None
    if info.rank is not None and reading.workers:  # no live worker: no ETA
        eta = read.eta_seconds(info.rank, reading.mean_run_ms, reading.workers)
    return JobDetail(
        info=info,
        task=task_name(info.body),
        arguments=arguments(info.body) if payload else None,
        last_error=info.last_error if payload else None,
        error_hidden=bool(info.last_error) and not payload,
        eta_seconds=eta,
        now_ms=reading.now_ms,
        workers=reading.workers,
    )
