"""Reads across queues, one pipeline per Redis client whatever the queues hold: each
queue's figures (:func:`figures`), where a job is (:func:`places`), the periodic
schedules (:func:`schedule_reads`) and the workers with the jobs they hold
(:func:`workers_reads`). :mod:`django_zqueue.read` decodes and shapes them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..records import text
from ..redis.connection import unavailable_as_error
from .pipeline import (
    STATES,
    Entry,
    Hash,
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

if TYPE_CHECKING:
    from ..base import EngineBase


# ---------------------------------------------------------------- each queue's figures


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """What one read of a queue's figures found (:func:`figures`)."""

    name: str
    counts: dict[str, int]  # ready, delayed, leased, dead, summed over the shards
    stats: list[Hash]  # each shard's stats hash, as stored
    head: Entry | None  # the job at rank 0
    record: Any  # its record, as stored (None: none waits, or gone)
    workers: Hash  # the workers hash, as stored
    paused: bool
    waiting: int  # jobs waiting for their parents (workflows)
    now_ms: int  # Redis time of the read


def figures(engines: Sequence[EngineBase]) -> list[QueueSnapshot]:
    """The figures of each queue, in order.

    Two round trips per Redis client: ``TIME``, then per shard four ``ZCARD``,
    ``HGETALL stats`` and ``ZRANGE ready 0 0 WITHSCORES``, and per queue ``HGETALL
    workers``, ``EXISTS`` of its pause key (the first shard's: a pause writes every
    shard's) and ``ZCARD wait`` of each shard; then one ``HGET meta`` of the first job of
    each queue that has one."""
    out: dict[str, QueueSnapshot] = {}
    for group in by_client(engines):
        with unavailable_as_error():
            timed = Timed(group[0]._client, group[0]._keys.ready)
            for e in group:
                queue_counts(timed.pipe, e._shards)
                for s in e._shards:
                    timed.pipe.hgetall(s.keys.stats)
                queue_range(timed.pipe, e._shards, "ready", 0, 1)
                timed.pipe.hgetall(e._keys.workers)
                timed.pipe.exists(e._shards[0].keys.paused)
                for s in e._shards:
                    timed.pipe.zcard(s.keys.wait)
            now_ms, replies = timed.execute()
            reads = [_snapshot(e, replies, now_ms) for e in group]
            records = _head_records(group, reads)
        for e, r in zip(group, reads, strict=True):
            out[e.name] = replace(r, record=records.get(e.name))
    return [out[e.name] for e in engines]


def _snapshot(e: EngineBase, replies: Replies, now_ms: int) -> QueueSnapshot:
    n = len(e._shards)
    counts = counts_of(replies, n)
    stats = take(replies, n)
    first = head(replies, n)
    workers = next(replies)
    paused = bool(int(next(replies)))
    waiting = sum(int(x) for x in take(replies, n))
    return QueueSnapshot(e.name, counts, stats, first, None, workers, paused, waiting, now_ms)


def _head_records(group: Sequence[EngineBase], reads: Sequence[QueueSnapshot]) -> dict[str, Any]:
    """The record of each queue's first job, by queue name: one round trip."""
    firsts = [(e, r.head) for e, r in zip(group, reads, strict=True) if r.head is not None]
    if not firsts:
        return {}
    pipe = group[0]._client.pipeline(transaction=False)
    for e, (tag, _, p) in firsts:
        pipe.hget(e._shards[p].keys.meta, tag)
    return {e.name: raw for (e, _), raw in zip(firsts, pipe.execute(), strict=True)}


# ---------------------------------------------------------------- where a job is


@dataclass(frozen=True, slots=True)
class Place:
    """Where a job is in ``queue``: its state, its score there, its rank (ready)."""

    queue: str
    #: ready | delayed | leased | dead | waiting | expired | orphan | succeeded | cancelled
    state: str
    score: float | None
    rank: int | None  # in the whole queue


def places(engines: Sequence[EngineBase], tag: str) -> list[Place]:
    """Where job ``tag`` is, in each of ``engines`` that has it, in order.

    One round trip per Redis client: in the job's shard of each queue, ``ZSCORE`` in
    each of the six sets and the two of the history of finished jobs, ``ZRANK`` in ready
    and ``HEXISTS`` of the record (O(log N) each); one more when a partitioned queue has
    it ready: ``ZCOUNT`` in its other shards (the rank in the whole queue)."""
    found: dict[str, Place] = {}
    for group in by_client(engines):
        with unavailable_as_error():
            pipe = group[0]._client.pipeline(transaction=False)
            for e in group:
                k = e._keys_for(tag)
                for key in (k.ready, k.delayed, k.leased, k.dead, k.wait, k.expired):
                    pipe.zscore(key, tag)
                pipe.zrank(k.ready, tag)
                pipe.hexists(k.meta, tag)
                pipe.zscore(k.finished, tag)
                pipe.zscore(k.cancels, tag)
            replies = iter(pipe.execute())
            found_here = [_place(e.name, take(replies, 10)) for e in group]
            found_here = _ranked(group, tag, found_here)
        found.update((p.queue, p) for p in found_here if p is not None)
    return [found[e.name] for e in engines if e.name in found]


def _place(queue: str, replies: list[Any]) -> Place | None:
    *scores, rank, has_record, succeeded, cancelled = replies
    for state, score in zip((*STATES, "waiting", "expired"), scores, strict=True):
        if score is not None:
            own = int(rank) if state == "ready" and rank is not None else None
            return Place(queue, state, float(score), own)
    if has_record:
        return Place(queue, "orphan", None, None)
    # ended, and kept in the history of finished jobs (info.lua reads it the same way)
    for state, score in (("succeeded", succeeded), ("cancelled", cancelled)):
        if score is not None:
            return Place(queue, state, float(score), None)
    return None


def _ranked(group: Sequence[EngineBase], tag: str, found: list[Place | None]) -> list[Place | None]:
    """``found`` with the rank of a ready job of a partitioned queue made global: the
    jobs ahead of it in the other shards added (one round trip, when there are any)."""
    pipe = group[0]._client.pipeline(transaction=False)
    counted = []
    for e, p in zip(group, found, strict=True):
        if p is not None and p.rank is not None and p.score is not None:
            counted.append((p, queue_ahead(pipe, e._shards, p.score, e._shard_for(tag).index)))
    if not any(n for _, n in counted):
        return found
    replies = iter(pipe.execute())
    ahead = {id(p): ahead_of(replies, n) for p, n in counted}
    return [
        p
        if p is None or id(p) not in ahead
        else Place(p.queue, p.state, p.score, (p.rank or 0) + ahead[id(p)])
        for p in found
    ]


# ---------------------------------------------------------------- periodic schedules

#: (name, next tick in ms or None, the tag of the last job fired or None)
Firing = tuple[str, float | None, str | None]


@dataclass(frozen=True, slots=True)
class ScheduleReading:
    """A queue's periodic schedules as stored: the definitions hash (name -> JSON), the
    firings of each schedule (sorted by name) and the state of each one's last job (None:
    none fired, or gone: finished)."""

    queue: str
    definitions: Hash
    firings: list[Firing]
    states: list[str | None]


def schedule_reads(engines: Sequence[EngineBase]) -> list[ScheduleReading]:
    """The periodic schedules of ``engines`` that have any, in order.

    At most three round trips per Redis client, O(schedules), never O(jobs):
    ``HGETALL`` of each queue's definitions; ``ZSCORE`` and ``HGET`` of the next and last
    firing of each schedule; the state of each last job (a read-only script)."""
    out: dict[str, ScheduleReading] = {}
    for group in by_client(engines):
        with unavailable_as_error():
            pipe = group[0]._client.pipeline(transaction=False)
            for e in group:
                pipe.hgetall(e._sched_keys.sched_defs)
            defined = [(e, defs) for e, defs in zip(group, pipe.execute(), strict=True) if defs]
            if not defined:
                continue
            pipe = group[0]._client.pipeline(transaction=False)
            for e, defs in defined:
                for name in sorted(text(k) for k in defs):
                    pipe.zscore(e._sched_keys.sched, name)
                    pipe.hget(e._sched_keys.sched_last, name)
            replies = iter(pipe.execute())
            fired = [(e, defs, _firings(defs, replies)) for e, defs in defined]
            batch = group[0].batch()
            pending = [
                batch.add(e._shards[0].state(job)) for e, _, fs in fired for _, _, job in fs if job
            ]
            group[0].send(batch)
        states = iter([p.result() for p in pending])
        for e, defs, fs in fired:
            last = [next(states) if f[2] else None for f in fs]
            out[e.name] = ScheduleReading(e.name, defs, fs, last)
    return [out[e.name] for e in engines if e.name in out]


def _firings(defs: Hash, replies: Replies) -> list[Firing]:
    """(name, next tick, last job) of each schedule of ``defs``, sorted by name."""
    out = []
    for name in sorted(text(k) for k in defs):
        nxt, last = next(replies), next(replies)
        when = None if nxt is None else float(nxt)
        parts = text(last).split(" ", 1) if last else []
        out.append((name, when, parts[1] if len(parts) == 2 else None))  # "<tick> <job>"
    return out


# ---------------------------------------------------------------- workers


@dataclass(frozen=True, slots=True)
class QueueWorkers:
    """A queue's workers hash (as stored), the orders left for its workers (``wctl``, as
    stored) and its jobs in flight nearest to their lease deadline: ``(tag, deadline
    score, record as stored, progress as stored)``."""

    queue: str
    workers: Hash
    held: list[tuple[str, float, Any, Any]]
    orders: Hash


@dataclass(frozen=True, slots=True)
class WorkersRead:
    queues: list[QueueWorkers]
    now_ms: int  # Redis time (of the last client read)
    capped: bool  # some shard had more than ``most`` jobs in flight: not all are listed


def workers_reads(engines: Sequence[EngineBase], most: int) -> WorkersRead:
    """Two round trips per Redis client: ``TIME``, ``HGETALL workers``, ``HGETALL wctl``
    and ``ZRANGE leased`` (``most`` + 1 entries) of each queue shard, then ``HMGET meta``
    and ``HMGET progress`` of the leased jobs (at most ``most`` per shard)."""
    out: list[QueueWorkers] = []
    now_ms, capped = 0, False
    for group in by_client(engines):
        with unavailable_as_error():
            timed = Timed(group[0]._client, group[0]._keys.workers)
            for e in group:
                timed.pipe.hgetall(e._keys.workers)
                timed.pipe.hgetall(e._keys.wctl)
                for s in e._shards:
                    timed.pipe.zrange(s.keys.leased, 0, most, withscores=True)
            now_ms, replies = timed.execute()
            leased: list[tuple[QueueWorkers, Any, list[tuple[bytes, float]]]] = []
            for e in group:
                workers = next(replies)
                queue = QueueWorkers(e.name, workers, [], next(replies))
                out.append(queue)
                for s in e._shards:
                    entries = next(replies)
                    capped = capped or len(entries) > most
                    leased.append((queue, s, entries[:most]))
            pipe = group[0]._client.pipeline(transaction=False)
            for _, s, entries in leased:
                tags = [text(tag) for tag, _ in entries] or ["-"]
                pipe.hmget(s.keys.meta, tags)
                pipe.hmget(s.keys.progress, tags)
            got = pipe.execute()
        for (queue, _, entries), raws, progress in zip(leased, got[::2], got[1::2], strict=True):
            for (tag, deadline), raw, done in zip(entries, raws, progress, strict=False):
                queue.held.append((text(tag), float(deadline), raw, done))
    return WorkersRead(out, now_ms, capped)
