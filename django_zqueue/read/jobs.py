"""Reads of jobs: a page of one state's jobs with their records, and one job.

A page is at most three round trips whatever the queue holds: the counts, Redis time and
the page's range of each shard (with, for ready jobs, the run-time counters and the
workers hash), then one ``HMGET`` per hash and shard for the page's tags only; a page
number past the end reads the last page instead (on one shard, one more round trip). On
a partitioned queue each shard's first ``offset + per_page`` entries are read and merged
in global order, so only the first ``MAX_MERGED`` jobs of a state can be listed; a page
past the end there is cut from the entries already read (all of them, then).

Besides the four states, a page may list the jobs of workflows waiting for their parents
(``waiting``: the ``wait`` set, oldest wait first), each with how many parents it needs
and has seen succeed (``HMGET wf:<id> need got`` in the second round trip).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..engine.reads import Entry, JobHashes, StateRange, check_state
from ..engine.records import JobInfo, Progress, Record, decode_json
from ..engine.records.attempts import last_error
from ..engine.records.codec import split_record
from ..engine.records.links import Links
from ..exceptions import InvalidArgument
from .stats import live_threads_now, mean_run_ms

if TYPE_CHECKING:
    from .source import Readable

#: on a partitioned queue, a merged listing (dead letters, admin pages) reads at most
#: this many entries per partition: offset + limit must stay within it
MAX_MERGED = 10_000
#: most jobs one page may list
MAX_LIMIT = 1000


def page_count(total: int, per_page: int, max_pages: int | None = None) -> int:
    """Pages of ``per_page`` jobs for ``total`` jobs (at least 1, at most ``max_pages``)."""
    pages = max(1, math.ceil(total / per_page))
    return pages if max_pages is None else min(pages, max_pages)


@dataclass(frozen=True, slots=True)
class ListedJob:
    """One job of a page, as read: its entry in the state's set and its hashes."""

    tag: str
    score: float  # its score in the state's sorted set
    shard: int
    record: Record | None  # None: gone since the range was read, or not a JSON object
    body: Any  # the decoded body; None when missing or not JSON
    progress: Progress | None = None  # leased jobs
    error: str | None = None  # dead jobs, when errors were asked for
    links: Links | None = None  # waiting jobs: need and got (no parents or dependents)


@dataclass(frozen=True, slots=True)
class Listing:
    """A page of one state's jobs, in order (ready: rank; delayed: run-at; leased: lease
    deadline; dead: most recent first; waiting: oldest wait first), with the counts of
    the same read."""

    state: str  # ready | delayed | leased | dead | waiting
    counts: dict[str, int]  # jobs per state (ready, delayed, leased, dead, waiting)
    jobs: list[ListedJob]
    number: int  # the page read (1-based): the last one when asked past the end
    per_page: int
    now_ms: int  # Redis time of the read
    workers: int = 0  # ready pages: live worker threads
    mean_run_ms: float | None = None  # ready pages: mean run time of acked jobs
    max_pages: int | None = None  # a partitioned queue lists its first MAX_MERGED jobs
    #: the jobs that ended: succeeded and cancelled (kept in the history), dead, expired
    ended: int = 0

    @property
    def offset(self) -> int:
        return (self.number - 1) * self.per_page


@dataclass(frozen=True, slots=True)
class _Range:
    counts: dict[str, int]
    entries: list[Entry]  # the page asked for
    now_ms: int
    workers: int
    mean_run_ms: float | None
    merged: list[Entry] | None = None  # several shards: every entry read, in order
    ended: int = 0  # the jobs that ended (succeeded, cancelled, dead, expired)


def read_listing(
    q: Readable, state: str, number: int = 1, per_page: int = 50, *, errors: bool = False
) -> Listing:
    """Page ``number`` of the jobs of ``q`` in ``state``, each with its record and body,
    its progress (leased), need and got (waiting) and, with ``errors``, its last error
    (dead)."""
    state = check_state(state, waiting=True)
    if number < 1 or not 1 <= per_page <= MAX_LIMIT:
        raise InvalidArgument(f"number must be >= 1 and per_page in [1, {MAX_LIMIT}]")
    max_pages = None if q.reads.partitions == 1 else max(1, MAX_MERGED // per_page)
    if max_pages is not None:
        number = min(number, max_pages)
    got = _read_range(q, state, number, per_page)
    last = page_count(got.counts[state], per_page, max_pages)
    entries = got.entries
    if not entries and number > last:  # past the end: the last page
        if got.merged is None:  # one shard: read it (the jobs that ended, counted already)
            again = _read_range(q, state, last, per_page, ended=False)
            got, number, entries = replace(again, ended=got.ended), last, again.entries
        else:  # several shards: an empty merged page means every entry was read
            number, entries = last, got.merged[(last - 1) * per_page : last * per_page]
    return Listing(
        state=state,
        counts=got.counts,
        jobs=_read_hashes(q, state, entries, errors),
        number=number,
        per_page=per_page,
        now_ms=got.now_ms,
        workers=got.workers,
        mean_run_ms=got.mean_run_ms,
        max_pages=max_pages,
        ended=got.ended,
    )


def _read_range(
    q: Readable, state: str, number: int, per_page: int, *, ended: bool = True
) -> _Range:
    """One round trip (:meth:`Reads.state_range
    <django_zqueue.engine.reads.Reads.state_range>`): the counts (with ``ended``, of the
    jobs that ended too), Redis time and the page of each shard, merged; for ready jobs
    also the run-time counters and the workers."""
    got: StateRange = q.reads.state_range(state, (number - 1) * per_page, per_page, ended=ended)
    if state != "ready":
        return _Range(got.counts, got.entries, got.now_ms, 0, None, got.merged, got.ended)
    mean = mean_run_ms(got.acked, got.run_ms)
    workers = live_threads_now(got.workers)
    return _Range(got.counts, got.entries, got.now_ms, workers, mean, got.merged, got.ended)


def _read_hashes(q: Readable, state: str, entries: list[Entry], errors: bool) -> list[ListedJob]:
    """The page's jobs with their records, bodies, progress (leased), errors (dead, with
    ``errors``) or links' counts (waiting): one round trip (:meth:`Reads.job_hashes
    <django_zqueue.engine.reads.Reads.job_hashes>`)."""
    found = q.reads.job_hashes(state, entries, errors)
    return [_listed(entry, hashes) for entry, hashes in zip(entries, found, strict=True)]


def _listed(entry: Entry, values: JobHashes) -> ListedJob:
    tag, score, p = entry
    body = values.body
    if values.meta:
        with contextlib.suppress(ValueError):  # an unreadable record: Record() below
            body = split_record(values.meta)[1] or body
    return ListedJob(
        tag=tag,
        score=score,
        shard=p,
        record=Record.decode(values.meta),
        body=decode_json(body),
        progress=Progress.decode(values.progress),
        error=last_error(values.errors),
        links=values.links,
    )


# ---------------------------------------------------------------- one job


@dataclass(frozen=True, slots=True)
class JobReading:
    """One job (its :class:`JobInfo`, ranked in the whole queue) and what its ETA needs."""

    info: JobInfo
    now_ms: int  # Redis time
    workers: int  # live worker threads
    mean_run_ms: float | None


def read_job(q: Readable, tag: str) -> JobReading | None:
    """One job with its body, or None. Two round trips: the ``info`` script, then Redis
    time, the run-time counters, the workers and, for a ready job of a partitioned queue,
    the jobs of the other shards ahead of it (its global rank)."""
    info = q.reads.info(tag, ranked=False)  # ranked below, with the figures
    if info is None:
        return None
    got = q.reads.job_figures(info)
    if got.ahead:
        info = replace(info, rank=(info.rank or 0) + got.ahead)
    mean = mean_run_ms(got.acked, got.run_ms)
    workers = live_threads_now(got.workers)
    return JobReading(info=info, now_ms=got.now_ms, workers=workers, mean_run_ms=mean)
