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

from ..engine.records import JobInfo, Progress, Record, decode_json
from ..engine.records.attempts import last_error
from ..engine.records.codec import split_record
from ..engine.records.links import Links
from ..engine.redis.connection import unavailable_as_error
from ..exceptions import InvalidArgument
from .links import link_counts_of, queue_link_counts
from .pipeline import (
    Entry,
    Timed,
    ahead_of,
    check_state,
    counts_of,
    ended_of,
    merged_range,
    queue_ahead,
    queue_counts,
    queue_ended,
    queue_range,
    queue_run_stats,
    queue_waiting,
    run_stats_of,
    take,
    waiting_of,
)
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
    max_pages = None if len(q.shards) == 1 else max(1, MAX_MERGED // per_page)
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
    """One round trip: ``TIME``, eight ``ZCARD`` (the four states, ``wait``, and, with
    ``ended``, ``finished``, ``cancels``, ``expired``: the jobs that ended) and the
    range of each shard, for ready jobs also ``HMGET stats acked run_ms`` of each shard
    and ``HGETALL workers``. One shard's reads are one transaction (one snapshot)."""
    shards = q.shards
    offset = (number - 1) * per_page
    with unavailable_as_error():
        timed = Timed(q.client, shards[0].keys.ready, transaction=len(shards) == 1)
        queue_counts(timed.pipe, shards)
        queue_waiting(timed.pipe, shards)
        if ended:
            queue_ended(timed.pipe, shards)
        queue_range(timed.pipe, shards, state, offset, per_page)
        if state == "ready":
            queue_run_stats(timed.pipe, shards)
            timed.pipe.hgetall(q.keys.workers)
        now_ms, replies = timed.execute()
    n = len(shards)
    counts = counts_of(replies, n)
    counts["waiting"] = waiting_of(replies, n)
    ended_n = counts["dead"] + ended_of(replies, n) if ended else 0
    if n == 1:
        merged, entries = None, merged_range(replies, 1, state, offset, per_page)
    else:
        merged = merged_range(replies, n, state, 0, n * (offset + per_page))
        entries = merged[offset : offset + per_page]
    if state != "ready":
        return _Range(counts, entries, now_ms, 0, None, merged, ended_n)
    mean = mean_run_ms(*run_stats_of(replies, n))
    workers = live_threads_now(next(replies))
    return _Range(counts, entries, now_ms, workers, mean, merged, ended_n)


def _read_hashes(q: Readable, state: str, entries: list[Entry], errors: bool) -> list[ListedJob]:
    """One round trip: ``HMGET`` of the record (and body, for the JSON layout) of the
    page's tags, and of their progress (leased) or errors (dead, with ``errors``), one per
    hash and shard; for
    waiting jobs also ``HMGET wf:<id> need got`` of each."""
    hashes = ["meta", "body"]
    if state == "leased":
        hashes.append("progress")
    if state == "dead" and errors:
        hashes.append("errors")
    by_shard: dict[int, list[str]] = {}
    for tag, _, p in entries:
        by_shard.setdefault(p, []).append(tag)
    if not by_shard:
        return []
    with unavailable_as_error():
        pipe = q.client.pipeline(transaction=False)
        for p, tags in by_shard.items():
            for name in hashes:
                pipe.hmget(getattr(q.shards[p].keys, name), tags)
        if state == "waiting":
            queue_link_counts(pipe, [q.shards[p].keys.wf(tag) for tag, _, p in entries])
        replies = iter(pipe.execute())
    found: dict[tuple[int, str], dict[str, Any]] = {}
    for p, tags in by_shard.items():
        columns = take(replies, len(hashes))
        for i, tag in enumerate(tags):
            found[(p, tag)] = {name: col[i] for name, col in zip(hashes, columns, strict=True)}
    links = link_counts_of(replies, len(entries)) if state == "waiting" else []
    out = []
    for i, (tag, score, p) in enumerate(entries):
        values = found[(p, tag)]
        body = values["body"]
        if values["meta"]:
            with contextlib.suppress(ValueError):  # an unreadable record: Record() below
                body = split_record(values["meta"])[1] or body
        out.append(
            ListedJob(
                tag=tag,
                score=score,
                shard=p,
                record=Record.decode(values["meta"]),
                body=decode_json(body),
                progress=Progress.decode(values.get("progress")),
                error=last_error(values.get("errors")),
                links=links[i] if links else None,
            )
        )
    return out


# ---------------------------------------------------------------- one job


@dataclass(frozen=True, slots=True)
class JobReading:
    """One job (its :class:`JobInfo`, ranked in the whole queue) and what its ETA needs."""

    info: JobInfo
    now_ms: int  # Redis time
    workers: int  # live worker threads
    mean_run_ms: float | None


def read_info(q: Readable, tag: str, *, with_body: bool = True) -> JobInfo | None:
    """As :meth:`Queue.info`: the ``info`` script, and on a partitioned queue, for a ready
    job, the jobs of the other shards ahead of it (one more round trip)."""
    with unavailable_as_error():
        info = q.run(q.info_call(tag, with_body=with_body))
        if info is None or info.rank is None or info.score is None or len(q.shards) == 1:
            return info
        pipe = q.client.pipeline(transaction=False)
        n = queue_ahead(pipe, q.shards, info.score, q.shard_for(tag).index)
        ahead = ahead_of(iter(pipe.execute()), n)
    return replace(info, rank=info.rank + ahead)


def read_job(q: Readable, tag: str) -> JobReading | None:
    """One job with its body, or None. Two round trips: the ``info`` script, then
    ``TIME``, ``HMGET stats acked run_ms`` of each shard, ``HGETALL workers`` and, for a
    ready job of a partitioned queue, ``ZCOUNT`` in the other shards (its global rank)."""
    with unavailable_as_error():
        info = q.run(q.info_call(tag, with_body=True))
    if info is None:
        return None
    shards, shard = q.shards, q.shard_for(tag)
    with unavailable_as_error():
        timed = Timed(q.client, shard.keys.stats)
        queue_run_stats(timed.pipe, shards)
        timed.pipe.hgetall(q.keys.workers)
        n = 0
        if info.rank is not None and info.score is not None:
            n = queue_ahead(timed.pipe, shards, info.score, shard.index)
        now_ms, replies = timed.execute()
    mean = mean_run_ms(*run_stats_of(replies, len(shards)))
    workers = live_threads_now(next(replies))
    if n:
        info = replace(info, rank=(info.rank or 0) + ahead_of(replies, n))
    return JobReading(info=info, now_ms=now_ms, workers=workers, mean_run_ms=mean)
