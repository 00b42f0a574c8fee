"""Building blocks of the engine's reads: pipelines that start with Redis ``TIME``, queues
grouped by client, and the shard-generic commands and merges that every read shares (a
state's range over all shards in global order, the jobs of other shards ahead of a score).

The global order of a queue's jobs is (score, shard index, tag): within a shard Redis
orders by score then member bytes, and across shards an equal score puts the
lower-numbered shard first. An unpartitioned queue is one shard, for which every merge
here is the identity.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import redis
from redis.client import Pipeline

from ...exceptions import InvalidArgument
from ..ahead import ahead_of as ahead_of
from ..ahead import queue_ahead as queue_ahead
from ..records import text
from ..redis.connection import is_cluster, server_time_ms

if TYPE_CHECKING:
    from ..base import EngineBase
    from ..shard import Shard

#: the four states' sorted sets, by state name
STATES = ("ready", "delayed", "leased", "dead")
#: the states a page lists: the four, and the jobs of a workflow waiting for their
#: parents (``waiting``: the ``wait`` set, id -> ms it began waiting)
LISTED = (*STATES, "waiting")
#: the key of a listed state's sorted set in :class:`~django_zqueue.engine.keys.QueueKeys`
SET_OF = {"waiting": "wait"}
#: ``(tag, score, shard index)``: one entry of a state's sorted set
Entry = tuple[str, float, int]
#: the replies of a pipeline, read in the order its commands were queued (redis-py's
#: replies are untyped)
Replies = Iterator[Any]
#: a hash as read: field -> value (bytes, or text when the client decodes responses)
Hash = dict[Any, Any]


def redis_ms(reply: tuple[int | bytes, int | bytes]) -> int:
    """A ``TIME`` reply in ms."""
    secs, micros = reply
    return int(secs) * 1000 + int(micros) // 1000


class Timed:
    """A pipeline whose replies come with Redis time (of the node holding ``key``).

    A cluster pipeline takes no ``TIME`` (nor does a cluster transaction): there the
    time is read first, on its own (one more round trip). Elsewhere ``TIME`` is the
    pipeline's first command, in the same round trip."""

    def __init__(self, client: redis.Redis, key: str, *, transaction: bool = False) -> None:
        self.pipe = client.pipeline(transaction=transaction)
        self.now_ms: int | None = None
        if is_cluster(client):
            self.now_ms = server_time_ms(client, key)
        else:
            self.pipe.time()

    def execute(self) -> tuple[int, Replies]:
        """(Redis time in ms, an iterator over the other commands' replies)."""
        replies = iter(self.pipe.execute())
        now_ms = self.now_ms if self.now_ms is not None else redis_ms(next(replies))
        return now_ms, replies


def by_client(engines: Sequence[EngineBase]) -> list[list[EngineBase]]:
    """``engines`` grouped by their Redis client (one pipeline per group), in order."""
    groups: dict[int, list[EngineBase]] = {}
    for e in engines:
        groups.setdefault(id(e._client), []).append(e)
    return list(groups.values())


def take(replies: Replies, n: int) -> list[Any]:
    """The next ``n`` replies."""
    return [next(replies) for _ in range(n)]


# ---------------------------------------------------------------- counts


def queue_counts(pipe: Pipeline, shards: Sequence[Shard]) -> None:
    """``ZCARD`` of the four sets of each shard (read back by :func:`counts_of`)."""
    for s in shards:
        for key in (s.keys.ready, s.keys.delayed, s.keys.leased, s.keys.dead):
            pipe.zcard(key)


def counts_of(replies: Replies, shards: int) -> dict[str, int]:
    """Jobs per state (``ready``, ``delayed``, ``leased``, ``dead``), summed over the
    shards, from the replies of :func:`queue_counts`."""
    got = [int(x) for x in take(replies, 4 * shards)]
    return {state: sum(got[i::4]) for i, state in enumerate(STATES)}


def queue_waiting(pipe: Pipeline, shards: Sequence[Shard]) -> None:
    """``ZCARD wait`` of each shard (read back by :func:`waiting_of`)."""
    for s in shards:
        pipe.zcard(s.keys.wait)


def waiting_of(replies: Replies, shards: int) -> int:
    """Jobs waiting for their parents, summed over the shards."""
    return sum(int(x) for x in take(replies, shards))


def queue_ended(pipe: Pipeline, shards: Sequence[Shard]) -> None:
    """``ZCARD`` of ``finished``, ``cancels`` and ``expired`` of each shard: the jobs that
    ended and are kept, but the dead letters (read back by :func:`ended_of`)."""
    for s in shards:
        for key in (s.keys.finished, s.keys.cancels, s.keys.expired):
            pipe.zcard(key)


def ended_of(replies: Replies, shards: int) -> int:
    """Jobs that succeeded, were cancelled or expired, summed over the shards."""
    return sum(int(x) for x in take(replies, 3 * shards))


# ---------------------------------------------------------------- a state's range


def check_state(state: str, *, waiting: bool = False) -> str:
    """The state's name (``inflight`` is ``leased``); ``ValueError`` for another. With
    ``waiting``, the states of :data:`LISTED`."""
    name = {"inflight": "leased"}.get(state, state)
    known = LISTED if waiting else STATES
    if name not in known:
        raise InvalidArgument(f"state must be one of {', '.join(known)}, got {state!r}")
    return name


def queue_range(
    pipe: Pipeline, shards: Sequence[Shard], state: str, offset: int, limit: int
) -> None:
    """The commands of a page of ``state`` (read back by :func:`merged_range`): one
    ``ZRANGE`` by index per shard (``ZREVRANGE`` for dead letters, newest first), from
    ``offset`` on one shard, from 0 on several (to be merged). ``waiting`` reads the
    ``wait`` set, oldest wait first."""
    start = offset if len(shards) == 1 else 0
    for s in shards:
        key = getattr(s.keys, SET_OF.get(state, state))
        if state == "dead":
            pipe.zrevrange(key, start, offset + limit - 1, withscores=True)
        else:
            pipe.zrange(key, start, offset + limit - 1, withscores=True)


def merged_range(replies: Replies, shards: int, state: str, offset: int, limit: int) -> list[Entry]:
    """The page read by :func:`queue_range`: its entries in global order (ascending by
    (score, shard, tag); dead letters descending)."""
    rows = take(replies, shards)
    entries = [(text(tag), float(score), p) for p, got in enumerate(rows) for tag, score in got]
    if shards == 1:
        return entries
    newest = state == "dead"
    entries.sort(key=lambda e: (e[1], e[2], e[0].encode("utf-8")), reverse=newest)
    return entries[offset : offset + limit]


def head(replies: Replies, shards: int) -> Entry | None:
    """The first ready job in global order, from one ``ZRANGE ready 0 0 WITHSCORES`` per
    shard (:func:`queue_range` with offset 0, limit 1)."""
    entries = merged_range(replies, shards, "ready", 0, 1)
    return entries[0] if entries else None


# ---------------------------------------------------------------- run time, workers


def queue_run_stats(pipe: Pipeline, shards: Sequence[Shard]) -> None:
    """``HMGET stats acked run_ms`` of each shard (read back by :func:`run_stats_of`)."""
    for s in shards:
        pipe.hmget(s.keys.stats, ["acked", "run_ms"])


def run_stats_of(replies: Replies, shards: int) -> tuple[int, int]:
    """(acked, run_ms) summed over the shards."""
    acked = run_ms = 0
    for a, r in take(replies, shards):
        acked += int(a or 0)
        run_ms += int(r or 0)
    return acked, run_ms
