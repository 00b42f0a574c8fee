"""Reads across queues: each queue's figures (the overview, the metrics, ``zqueue_stats``)
and where a job is (the search).

Both read every queue of one Redis client in one pipeline, whatever the queues hold:
``O(1)`` or ``O(log N)`` commands per shard, no ``KEYS``, ``SCAN`` or script
(:meth:`Reads.figures <django_zqueue.engine.reads.Reads.figures>`,
:meth:`Reads.places <django_zqueue.engine.reads.Reads.places>`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..engine.reads import QueueSnapshot, Reads
from ..engine.records import Record, score_text
from ..engine.records.validate import MAX_TAG_BYTES
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
    return [_figures(got) for got in Reads.figures([q.reads for q in queues])]


def _figures(got: QueueSnapshot) -> QueueFigures:
    c = got.counts
    return QueueFigures(
        name=got.name,
        ready=c["ready"],
        delayed=c["delayed"],
        inflight=c["leased"],
        dead=c["dead"],
        stats=merge_stats([decode_stats(raw) for raw in got.stats]),
        workers=live_threads_now(got.workers),
        head=None if got.head is None else Record.decode(got.record),
        now_ms=got.now_ms,
        paused=got.paused,
        waiting=got.waiting,
    )


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
    return [
        Location(p.queue, tag, p.state, p.score, p.rank)
        for p in Reads.places([q.reads for q in queues], tag)
    ]
