"""Reads across queues: each queue's figures (the overview, the metrics, ``zqueue_stats``)
and where a job is (the search).

Both read every queue of one Redis client in one pipeline, whatever the queues hold:
``O(1)`` or ``O(log N)`` commands per shard, no ``KEYS``, ``SCAN`` or script.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from ..engine.records import Record, score_text
from ..engine.records.validate import MAX_TAG_BYTES
from ..engine.redis.connection import unavailable_as_error
from .pipeline import (
    STATES,
    Replies,
    Timed,
    ahead_of,
    by_client,
    counts_of,
    head,
    queue_ahead,
    queue_counts,
    queue_range,
    take,
)
from .stats import Minute, counters, decode_stats, live_threads_now, merge_stats, minutes

if TYPE_CHECKING:
    from .source import Readable


@dataclass(frozen=True, slots=True)
class QueueFigures:
    """One queue's figures from one read: counts, the stats hash (merged over the
    shards), live worker threads and the record of the job at rank 0."""

    name: str
    ready: int
    delayed: int
    inflight: int
    dead: int
    stats: dict[str, int]  # the decoded stats hash: counters and the minute ring
    workers: int  # live worker threads
    head: Record | None  # the record of the job claimed next; None when none waits
    now_ms: int  # Redis time of the read
    paused: bool = False  # Queue.pause(): claims hand out nothing
    waiting: int = 0  # jobs waiting for their parents (workflows)

    @property
    def counters(self) -> dict[str, int]:
        """The lifetime counters (enqueued, acked, failed, retried, ..., run_ms)."""
        return counters(self.stats)

    @property
    def lag_seconds(self) -> float | None:
        """Now minus the enqueue time of the job at rank 0; None when none waits."""
        if self.head is None or self.head.enqueued_at_ms is None:
            return None
        return max(0.0, (self.now_ms - self.head.enqueued_at_ms) / 1000)

    def minutes(self, last: int = 60) -> list[Minute]:
        """The last ``last`` minutes of the ring, oldest first; the current minute's depth
        is the current count of ready jobs."""
        return minutes(self.stats, self.now_ms, last, self.ready)


def overview(queues: Sequence[Readable]) -> list[QueueFigures]:
    """The figures of each queue, in order.

    Two round trips per Redis client: ``TIME``, then per shard four ``ZCARD``,
    ``HGETALL stats`` (bounded: the counters and the 64-slot ring) and ``ZRANGE ready 0 0
    WITHSCORES``, and per queue ``HGETALL workers`` (one field per worker) and ``EXISTS``
    of its pause key (the first shard's: a pause writes every shard's) and ``ZCARD wait``
    of each shard (workflows); then one
    ``HGET meta`` of the first job of each queue that has one."""
    out: dict[str, QueueFigures] = {}
    for group in by_client(queues):
        with unavailable_as_error():
            timed = Timed(group[0].client, group[0].keys.ready)
            for q in group:
                queue_counts(timed.pipe, q.shards)
                for s in q.shards:
                    timed.pipe.hgetall(s.keys.stats)
                queue_range(timed.pipe, q.shards, "ready", 0, 1)
                timed.pipe.hgetall(q.keys.workers)
                timed.pipe.exists(q.shards[0].keys.paused)
                for s in q.shards:
                    timed.pipe.zcard(s.keys.wait)
            now_ms, replies = timed.execute()
            reads = [_QueueRead.of(q, replies) for q in group]
            heads = _head_records(group[0].client, reads)
        for r in reads:
            out[r.queue.name] = r.figures(heads.get(r.queue.name), now_ms)
    return [out[q.name] for q in queues]


@dataclass(frozen=True, slots=True)
class _QueueRead:
    """What the first round trip of :func:`overview` read of one queue."""

    queue: Readable
    counts: dict[str, int]
    stats: dict[str, int]
    head: tuple[str, int] | None  # (tag, shard) of the job at rank 0
    workers: int
    paused: bool
    waiting: int

    @classmethod
    def of(cls, q: Readable, replies: Replies) -> _QueueRead:
        n = len(q.shards)
        counts = counts_of(replies, n)
        stats = merge_stats([decode_stats(raw) for raw in take(replies, n)])
        first = head(replies, n)
        workers = live_threads_now(next(replies))
        paused = bool(int(next(replies)))
        waiting = sum(int(x) for x in take(replies, n))
        where = None if first is None else (first[0], first[2])
        return cls(q, counts, stats, where, workers, paused, waiting)

    def figures(self, record: Record | None, now_ms: int) -> QueueFigures:
        c = self.counts
        return QueueFigures(
            name=self.queue.name,
            ready=c["ready"],
            delayed=c["delayed"],
            inflight=c["leased"],
            dead=c["dead"],
            stats=self.stats,
            workers=self.workers,
            head=record,
            now_ms=now_ms,
            paused=self.paused,
            waiting=self.waiting,
        )


def _head_records(client: redis.Redis, reads: Sequence[_QueueRead]) -> dict[str, Record | None]:
    """The record of each queue's first job, by queue name: one round trip."""
    firsts = [(r.queue, r.head) for r in reads if r.head is not None]
    if not firsts:
        return {}
    pipe = client.pipeline(transaction=False)
    for q, (tag, p) in firsts:
        pipe.hget(q.shards[p].keys.meta, tag)
    return {q.name: Record.decode(raw) for (q, _), raw in zip(firsts, pipe.execute(), strict=True)}


# ---------------------------------------------------------------- where a job is


@dataclass(frozen=True, slots=True)
class Location:
    """Where job ``tag`` is in ``queue``: its state, its score there, its rank (ready)."""

    queue: str
    tag: str
    #: ready | delayed | leased | dead | waiting | expired | orphan | succeeded | cancelled
    state: str
    score: float | None
    rank: int | None  # in the whole queue

    @property
    def score_text(self) -> str:
        return score_text(self.score)


def valid_tag(tag: str) -> bool:
    """Whether ``tag`` can be a job's tag (1 to 256 bytes of UTF-8)."""
    return 0 < len(tag.encode("utf-8")) <= MAX_TAG_BYTES


def locate(queues: Sequence[Readable], tag: str) -> list[Location]:
    """Where job ``tag`` is, in each of ``queues`` that has it, in order.

    One round trip per Redis client: in the job's shard of each queue, ``ZSCORE`` in
    each of the six sets and the two of the history of finished jobs, ``ZRANK`` in ready
    and ``HEXISTS`` of the record (O(log N) each); one more when a partitioned queue has
    it ready: ``ZCOUNT`` in its other shards (the rank in the whole queue). An invalid
    tag is found nowhere."""
    if not valid_tag(tag):
        return []
    found: dict[str, Location] = {}
    for group in by_client(queues):
        with unavailable_as_error():
            pipe = group[0].client.pipeline(transaction=False)
            for q in group:
                k = q.keys_for(tag)
                for key in (k.ready, k.delayed, k.leased, k.dead, k.wait, k.expired):
                    pipe.zscore(key, tag)
                pipe.zrank(k.ready, tag)
                pipe.hexists(k.meta, tag)
                pipe.zscore(k.finished, tag)
                pipe.zscore(k.cancels, tag)
            replies = iter(pipe.execute())
            places = [_place(q, tag, take(replies, 10)) for q in group]
            places = _ranked(group[0].client, group, places)
        found.update((loc.queue, loc) for loc in places if loc is not None)
    return [found[q.name] for q in queues if q.name in found]


def _place(q: Readable, tag: str, replies: list[Any]) -> Location | None:
    *scores, rank, has_record, succeeded, cancelled = replies
    for state, score in zip((*STATES, "waiting", "expired"), scores, strict=True):
        if score is not None:
            own = int(rank) if state == "ready" and rank is not None else None
            return Location(q.name, tag, state, float(score), own)
    if has_record:
        return Location(q.name, tag, "orphan", None, None)
    # ended, and kept in the history of finished jobs (info.lua reads it the same way)
    for state, score in (("succeeded", succeeded), ("cancelled", cancelled)):
        if score is not None:
            return Location(q.name, tag, state, float(score), None)
    return None


def _ranked(
    client: redis.Redis, group: Sequence[Readable], places: list[Location | None]
) -> list[Location | None]:
    """``places`` with the rank of a ready job of a partitioned queue made global: the
    jobs ahead of it in the other shards added (one round trip, when there are any)."""
    pipe = client.pipeline(transaction=False)
    counted = []
    for q, loc in zip(group, places, strict=True):
        if loc is not None and loc.rank is not None and loc.score is not None:
            index = q.shard_for(loc.tag).index
            counted.append((loc, queue_ahead(pipe, q.shards, loc.score, index)))
    if not any(n for _, n in counted):
        return places
    replies = iter(pipe.execute())
    ahead = {id(loc): ahead_of(replies, n) for loc, n in counted}
    return [
        loc
        if loc is None or id(loc) not in ahead
        else Location(loc.queue, loc.tag, loc.state, loc.score, (loc.rank or 0) + ahead[id(loc)])
        for loc in places
    ]
