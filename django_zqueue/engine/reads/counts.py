"""One queue's counts, counters and registrations, read over its shards: one round trip
each (the read side, :mod:`django_zqueue.read`, decodes and merges them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..records import JobInfo
from ..redis.connection import is_cluster, server_time_ms, unavailable_as_error
from .pipeline import Entry, Hash, counts_of, merged_range, queue_counts, queue_range, redis_ms

if TYPE_CHECKING:
    from ..base import EngineBase


@dataclass(frozen=True, slots=True)
class MinuteReading:
    """What the minutes of a queue are made of: Redis time, each shard's stats hash (raw)
    and the jobs ready now, summed over the shards."""

    now_ms: int
    stats: list[Hash]
    ready: int


def ready_count(e: EngineBase) -> int:
    """Jobs ready, over all shards (one ``ZCARD`` per shard)."""
    if len(e._shards) > 1:
        return state_counts(e)["ready"]
    with unavailable_as_error():
        return int(e._client.zcard(e._keys.ready))


def state_counts(e: EngineBase) -> dict[str, int]:
    """Jobs per state (``ready``, ``delayed``, ``leased``, ``dead``), summed over the
    shards (one transaction on one shard: one snapshot)."""
    with unavailable_as_error():
        pipe = e._client.pipeline(transaction=len(e._shards) == 1)
        queue_counts(pipe, e._shards)
        return counts_of(iter(pipe.execute()), len(e._shards))


def waiting_count(e: EngineBase) -> int:
    """Jobs waiting for their parents (workflows), over all shards."""
    with unavailable_as_error():
        pipe = e._client.pipeline(transaction=False)
        for s in e._shards:
            pipe.zcard(s.keys.wait)
        return sum(int(n) for n in pipe.execute())


def stats_hashes(e: EngineBase) -> list[Hash]:
    """The stats hash of each shard, as stored."""
    with unavailable_as_error():
        pipe = e._client.pipeline(transaction=False)
        for s in e._shards:
            pipe.hgetall(s.keys.stats)
        found: list[Hash] = pipe.execute()
    return found


def minute_reading(e: EngineBase, roll: int | None = None) -> MinuteReading:
    """Redis time, the stats hashes and the ready jobs: one round trip (two on a Redis
    Cluster or a partitioned queue, whose shards may live on several nodes: ``TIME``
    first). With ``roll`` (10 or 60), the roll-up rings of that many minutes a bucket
    (:mod:`django_zqueue.engine.rollup`) instead of the stats hashes."""
    with unavailable_as_error():
        own_time = len(e._shards) == 1 and not is_cluster(e._client)
        now_ms = 0 if own_time else server_time_ms(e._client, e._keys.stats)
        pipe = e._client.pipeline(transaction=False)
        if own_time:
            pipe.time()
        for s in e._shards:
            pipe.hgetall(s.keys.stats if roll is None else s.keys.roll(roll))
            pipe.zcard(s.keys.ready)
        replies = pipe.execute()
    if own_time:
        now_ms = redis_ms(replies.pop(0))
    return MinuteReading(now_ms, replies[0::2], sum(int(n) for n in replies[1::2]))


def workers_hash(e: EngineBase) -> Hash:
    """The queue's workers hash, as stored (worker id -> its registration)."""
    with unavailable_as_error():
        found: Hash = e._client.hgetall(e._keys.workers)
    return found


def state_page(e: EngineBase, state: str, offset: int, limit: int) -> list[Entry]:
    """One page of a state's sorted set (a name of ``STATES``) over all shards, in global
    order (:func:`~.pipeline.merged_range`); ``offset + limit`` entries of each shard are
    read on a partitioned queue."""
    with unavailable_as_error():
        pipe = e._client.pipeline(transaction=False)
        queue_range(pipe, e._shards, state, offset, limit)
        replies = iter(pipe.execute())
    return merged_range(replies, len(e._shards), state, offset, limit)


def infos(
    e: EngineBase, entries: Sequence[tuple[str, int]], *, with_body: bool = True
) -> list[JobInfo]:
    """:class:`JobInfo` of ``(tag, shard index)`` pairs, in one round trip; jobs gone in
    the meantime are left out."""
    if not entries:
        return []
    batch = e.batch()
    pending = [batch.add(e._shards[p].info(tag, with_body)) for tag, p in entries]
    e.send(batch)
    return [info for p in pending if (info := p.result()) is not None]


def task_stat_slots(e: EngineBase, first: int, last: int) -> list[Hash]:
    """The raw per-task statistics hashes of slots ``first`` to ``last`` (inclusive):
    one round trip, one ``HGETALL`` a slot."""
    with unavailable_as_error():
        pipe = e._client.pipeline(transaction=False)
        for slot in range(first, last + 1):
            pipe.hgetall(e._keys.task_stats(slot))
        found: list[Hash] = pipe.execute()
    return found
