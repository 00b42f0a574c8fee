"""The admin dashboard's shaping for display: rows, charts and text, from the reads of
:mod:`django_zqueue.read`.

Every Redis read and every decoding of what Redis holds (job records, the stats hash,
worker registrations) is in :mod:`django_zqueue.read` and :mod:`django_zqueue.engine.records`;
the dashboard turns their results into what the templates show. This module holds the
overview's rows (its SVG charts are :mod:`django_zqueue.admin.charts`) and a job's detail; a
queue page's lists (job rows with their times, ranks and ETAs as text, pages of a tab)
are :mod:`django_zqueue.admin.dashboard_lists`, and the text of times, counts and a job's
arguments is :mod:`django_zqueue.admin.dashboard_text`. Every name of those two is importable
from here. Each page's Redis cost is that of its read (see docs/admin.md).

No Django views here: :mod:`django_zqueue.admin` renders what these functions return.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from django.utils.translation import gettext as _

from .. import read
from ..engine.records import JobInfo, Progress
from ..exceptions import InvalidArgument
from ..read import SERIES as SERIES  # the per-minute series of the stats ring
from ..read import Location as Location
from ..read import Minute as Minute
from ..read import ScheduleRow as ScheduleRow
from ..read import valid_tag as valid_tag
from ..web import humanize
from .charts import Chart as Chart
from .charts import Line as Line
from .charts import Tick as Tick
from .charts import line_chart as line_chart
from .charts import nice_ceiling as nice_ceiling
from .charts import wants_log as wants_log
from .dashboard_lists import ENDED as ENDED
from .dashboard_lists import MAX_PAGE as MAX_PAGE
from .dashboard_lists import MAX_PER_PAGE as MAX_PER_PAGE
from .dashboard_lists import STATE_TABS as STATE_TABS
from .dashboard_lists import TABS as TABS
from .dashboard_lists import JobRow as JobRow
from .dashboard_lists import Page as Page
from .dashboard_lists import finished_page as finished_page
from .dashboard_lists import finished_row as finished_row
from .dashboard_lists import job_row as job_row
from .dashboard_lists import page as page
from .dashboard_text import ERROR_LINE_CHARS as ERROR_LINE_CHARS
from .dashboard_text import arguments as arguments
from .dashboard_text import due_in as due_in
from .dashboard_text import first_line as first_line
from .dashboard_text import local_text as local_text
from .dashboard_text import location_when as location_when
from .dashboard_text import of as of
from .dashboard_text import task_name as task_name

if TYPE_CHECKING:
    from ..queue import Queue

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
