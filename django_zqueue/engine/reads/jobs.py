"""Reads of jobs: a page of one state with the counts of the same read, the hashes of
the page's jobs, and one job ranked in the whole queue with what its ETA needs.

A page is two round trips whatever the queue holds (:func:`state_range`, then
:func:`job_hashes`); :mod:`django_zqueue.read.jobs` decodes and shapes them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..records import JobInfo, validate
from ..records.links import Links
from ..redis.connection import unavailable_as_error
from .links import link_counts_of, queue_link_counts
from .pipeline import (
    Entry,
    Hash,
    Timed,
    ahead_of,
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

if TYPE_CHECKING:
    from ..base import EngineBase


@dataclass(frozen=True, slots=True)
class StateRange:
    """A page of a state's sorted set, read with the queue's counts in one round trip."""

    now_ms: int  # Redis time of the read
    counts: dict[str, int]  # jobs per state: ready, delayed, leased, dead, waiting
    entries: list[Entry]  # the page asked for, in global order
    merged: list[Entry] | None = None  # several shards: every entry read, in order
    ended: int = 0  # the jobs that ended (succeeded, cancelled, dead, expired), if asked
    acked: int = 0  # ready pages: the acked counter, summed over the shards
    run_ms: int = 0  # ready pages: the run_ms counter, summed over the shards
    workers: Hash = field(default_factory=dict)  # ready pages: the workers hash


@dataclass(frozen=True, slots=True)
class JobHashes:
    """What the hashes hold of one listed job, as stored (None: nothing)."""

    meta: Any  # its record
    body: Any  # its body, in the JSON layout
    progress: Any = None  # leased jobs
    errors: Any = None  # dead jobs, when errors were asked for
    links: Links | None = None  # waiting jobs: need and got


@dataclass(frozen=True, slots=True)
class JobFigures:
    """What one job's ETA needs, read in one round trip after its info."""

    now_ms: int  # Redis time
    acked: int  # summed over the shards
    run_ms: int
    workers: Hash  # the workers hash
    ahead: int  # a ready job of a partitioned queue: the jobs of other shards ahead


def state_range(
    e: EngineBase, state: str, offset: int, limit: int, *, ended: bool = True
) -> StateRange:
    """One round trip: ``TIME``, eight ``ZCARD`` (the four states, ``wait``, and, with
    ``ended``, ``finished``, ``cancels``, ``expired``) and the range of ``state`` (a name
    of ``LISTED``) of each shard; for ready jobs also ``HMGET stats acked run_ms`` of each
    shard and ``HGETALL workers``. One shard's reads are one transaction (one snapshot).
    On several shards, each one's first ``offset + limit`` entries are read and merged."""
    shards = e._shards
    n = len(shards)
    with unavailable_as_error():
        timed = Timed(e._client, shards[0].keys.ready, transaction=n == 1)
        queue_counts(timed.pipe, shards)
        queue_waiting(timed.pipe, shards)
        if ended:
            queue_ended(timed.pipe, shards)
        queue_range(timed.pipe, shards, state, offset, limit)
        if state == "ready":
            queue_run_stats(timed.pipe, shards)
            timed.pipe.hgetall(e._keys.workers)
        now_ms, replies = timed.execute()
    counts = counts_of(replies, n)
    counts["waiting"] = waiting_of(replies, n)
    ended_n = counts["dead"] + ended_of(replies, n) if ended else 0
    if n == 1:
        merged, entries = None, merged_range(replies, 1, state, offset, limit)
    else:
        merged = merged_range(replies, n, state, 0, n * (offset + limit))
        entries = merged[offset : offset + limit]
    got = StateRange(now_ms, counts, entries, merged, ended_n)
    if state != "ready":
        return got
    acked, run_ms = run_stats_of(replies, n)
    return replace(got, acked=acked, run_ms=run_ms, workers=next(replies))


def job_hashes(e: EngineBase, state: str, entries: list[Entry], errors: bool) -> list[JobHashes]:
    """One round trip: ``HMGET`` of the record (and body, for the JSON layout) of the
    entries' tags, and of their progress (leased) or errors (dead, with ``errors``), one
    per hash and shard; for waiting jobs also ``HMGET wf:<id> need got`` of each. In the
    order of ``entries``."""
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
        pipe = e._client.pipeline(transaction=False)
        for p, tags in by_shard.items():
            for name in hashes:
                pipe.hmget(getattr(e._shards[p].keys, name), tags)
        if state == "waiting":
            queue_link_counts(pipe, [e._shards[p].keys.wf(tag) for tag, _, p in entries])
        replies = iter(pipe.execute())
    found: dict[tuple[int, str], dict[str, Any]] = {}
    for p, tags in by_shard.items():
        columns = take(replies, len(hashes))
        for i, tag in enumerate(tags):
            found[(p, tag)] = {name: col[i] for name, col in zip(hashes, columns, strict=True)}
    links = link_counts_of(replies, len(entries)) if state == "waiting" else []
    return [
        JobHashes(**found[(p, tag)], links=links[i] if links else None)
        for i, (tag, _, p) in enumerate(entries)
    ]


def ranked_info(
    e: EngineBase, tag: str, *, with_body: bool = True, ranked: bool = True
) -> JobInfo | None:
    """As :meth:`Queue.info`: the ``info`` script, and with ``ranked``, on a partitioned
    queue, for a ready job, the jobs of the other shards ahead of it (one more round
    trip); without, its rank is the one in its shard."""
    with unavailable_as_error():
        info = e.run(e._shard_for(validate.tag(tag)).info(tag, with_body))
        if info is None or info.rank is None or info.score is None or len(e._shards) == 1:
            return info
        if not ranked:  # its rank in its shard
            return info
        pipe = e._client.pipeline(transaction=False)
        n = queue_ahead(pipe, e._shards, info.score, e._shard_for(tag).index)
        ahead = ahead_of(iter(pipe.execute()), n)
    return replace(info, rank=info.rank + ahead)


def job_figures(e: EngineBase, info: JobInfo) -> JobFigures:
    """One round trip: ``TIME``, ``HMGET stats acked run_ms`` of each shard, ``HGETALL
    workers`` and, for a ready job (``info``, its rank in its shard) of a partitioned
    queue, ``ZCOUNT`` in the other shards."""
    shards, shard = e._shards, e._shard_for(info.tag)
    with unavailable_as_error():
        timed = Timed(e._client, shard.keys.stats)
        queue_run_stats(timed.pipe, shards)
        timed.pipe.hgetall(e._keys.workers)
        n = 0
        if info.rank is not None and info.score is not None:
            n = queue_ahead(timed.pipe, shards, info.score, shard.index)
        now_ms, replies = timed.execute()
    acked, run_ms = run_stats_of(replies, len(shards))
    workers = next(replies)
    return JobFigures(now_ms, acked, run_ms, workers, ahead_of(replies, n) if n else 0)
